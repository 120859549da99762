"""The Text tab: speculative code completion, tokens coloured by where they came from.

Per round the target emits the accepted draft tokens, then one token of its own: the correction at
the first rejected draft token, or the bonus token when all k drafted tokens passed. A round with
nothing drafted (n-gram lookup without a match) emits the target's own token, shown as a
correction.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import gradio as gr

from specvideo.app.common import (
    STATS_HEADERS,
    bounded_int,
    cached,
    check,
    percent,
    ratio,
    user_errors,
)
from specvideo.app.config import AppConfig
from specvideo.core.types import SpecStats, Step
from specvideo.text import TEXT_DEFAULTS, SpeculativeGenerator, TextConfig, TextModels
from specvideo.text.config import HEAD_DRAFTERS

ACCEPTED, CORRECTION, BONUS = "accepted draft", "target correction", "bonus token"
COLORS = {ACCEPTED: "#4caf50", CORRECTION: "#f44336", BONUS: "#2196f3"}
DRAFTERS = [
    ("draft model", "model"),
    ("draft model + prompt lookup", "hybrid"),
    ("draft head on the target's features + prompt lookup", "head-hybrid"),
    ("draft head, token tree + prompt lookup", "head-hybrid-tree"),
    ("n-gram (prompt lookup)", "ngram"),
]
EXAMPLES = [
    "def quicksort(arr):",
    "class Stack:\n    def __init__(self):",
    "import os\n\n\ndef list_python_files(root):",
    "def fibonacci(n):\n    ",
]


@cached
def load_models(target_dir: str, draft_dir: str, dtype: str = "auto") -> TextModels:
    """The Text and Chat tabs' models in ``dtype``, loaded once per process; every request builds a
    cheap generator over them. Empty paths load the library's default pair (SmolLM2-135M-Instruct
    and its trained draft), to which the draft head is added on first use (``with_head``)."""
    if not target_dir:
        return TextModels.from_pretrained(drafter="hybrid", dtype=dtype)
    return TextModels.from_pretrained(target_dir, draft_dir or None, dtype, drafter="hybrid" if draft_dir else "ngram")


def with_head(models: TextModels, target_dir: str) -> TextModels:
    """``models`` with the shipped draft head on the default target's features (loaded once)."""
    from specvideo.paths import shipped
    from specvideo.text.models.head import load_head
    from specvideo.text.models.vocab import load_token_ranking
    from specvideo.text.text_models import DEFAULT_HEAD

    check(not target_dir, "the draft head is trained for the default target (SmolLM2): use another drafter")
    if models.head is None:
        head_dir = shipped(*DEFAULT_HEAD)
        models.add_head(load_head(head_dir, models.target), load_token_ranking(head_dir))
    return models


def make_generator(config: AppConfig, drafter: str, k: int) -> SpeculativeGenerator:
    """A generator over the cached models: "model" (run lean when the draft is a Llama), "hybrid"
    (prompt lookup, else the lean draft), "head-hybrid" / "head-hybrid-tree" (prompt lookup, else
    the draft head's chain / tree; the default target only), "ngram", or "none" (target-only). The
    lean drafters propose the FR-Spec vocabulary of the ranking beside their model."""
    models = load_models(config.text_target, config.text_draft, config.text_dtype)
    check(models.tokenizer is not None, "the text target model has no tokenizer")
    if drafter in HEAD_DRAFTERS:
        with_head(models, config.text_target)
    if drafter in ("model", "hybrid"):
        check(models.draft is not None, "the text target has no draft model: use the n-gram drafter")
    if drafter == "model" and models.draft.config.model_type == "llama":
        drafter = "lean"
    return SpeculativeGenerator(models, TEXT_DEFAULTS, drafter=drafter, num_draft_tokens=k)


def origins(step: Step) -> list[str]:
    """The origin of every token emitted in a round (batch of one)."""
    accepted, drafted = int(step.verdict.num_accepted[0]), int(step.draft.lengths[0])  # a tree's: its depth
    last = BONUS if drafted and accepted == drafted else CORRECTION
    return ([ACCEPTED] * accepted + [last])[: len(step.emitted[0])]


@dataclass
class ColouredText:
    """The prompt and the generated text, split into (text, origin) spans for gr.HighlightedText.

    A token that ends inside a multi-byte character adds no text; the token completing it does."""

    tokenizer: object
    prompt: str | list[dict]
    ids: list[int] = field(default_factory=list)
    spans: list[list] = field(default_factory=list)
    decoded: str = ""

    def add(self, ids: list[int], labels: list[str]) -> None:
        for token, label in zip(ids, labels, strict=True):
            self.ids.append(token)
            text = self.tokenizer.decode(self.ids, skip_special_tokens=True).rstrip("\ufffd")
            if len(text) > len(self.decoded):
                self._append(text[len(self.decoded) :], label)
                self.decoded = text

    def _append(self, piece: str, label: str) -> None:
        if self.spans and self.spans[-1][1] == label:
            self.spans[-1][0] += piece
        else:
            self.spans.append([piece, label])

    def value(self) -> list[tuple[str, str | None]]:
        return [(self.prompt, None), *((text, label) for text, label in self.spans)]


@dataclass(frozen=True)
class TextRequest:
    """One request of the Text or Chat tab: the prompt (text, or the chat's messages) and its
    settings, one TextConfig."""

    prompt: str | list[dict]
    settings: TextConfig

    def generate_kwargs(self) -> dict:
        s = self.settings
        return dict(
            max_new_tokens=s.max_new_tokens,
            temperature=s.temperature,
            seed=s.seed,  # the row's own: the same text as the CLI's and the server's seed
        )


def text_request(config: AppConfig, prompt, drafter, k, temperature, max_new_tokens, seed) -> TextRequest:
    """The checked request of either tab's settings (``config``: the app's limits)."""
    choices = list(dict(DRAFTERS).values())
    check(drafter in choices, f"drafter must be one of {choices}, got {drafter!r}")
    settings = TEXT_DEFAULTS.updated(
        drafter=drafter,
        num_draft_tokens=bounded_int(k, "k", 1, config.max_draft),
        temperature=float(temperature),
        max_new_tokens=bounded_int(max_new_tokens, "max tokens", 1, config.max_new_tokens),
        seed=bounded_int(seed, "seed", 0, 2**63 - 1),
    )
    return TextRequest(prompt, settings)


@dataclass(frozen=True)
class Baseline:
    """The measured target-only run."""

    seconds: float
    target_calls: int
    same_tokens: bool | None  # None when sampling: equal in distribution, not token for token


def run_target_only(config: AppConfig, request, spec_ids: list[int]) -> Baseline:
    out = make_generator(config, "none", 1).generate(request.prompt, **request.generate_kwargs())
    same = out.token_ids == spec_ids if request.settings.temperature == 0 else None
    return Baseline(out.stats.time_total, out.stats.target_calls, same)


def stats_rows(stats: SpecStats, baseline: Baseline | None = None) -> list[list[str]]:
    seconds = stats.time_total
    rows = [
        ["tokens generated", str(stats.emitted)],
        ["rounds", str(stats.rounds)],
        ["draft tokens accepted", f"{stats.accepted} / {stats.drafted}"],
        ["acceptance rate", percent(stats.acceptance_rate)],
        ["mean accepted length", f"{stats.mean_accepted_length:.2f}"],
        ["target forward passes", f"{stats.target_calls} (target-only: {stats.target_only_calls})"],
        ["estimated speedup (target passes)", ratio(stats.target_only_calls, stats.target_calls)],
        ["wall time", f"{seconds:.2f} s ({stats.emitted / seconds if seconds else 0:.1f} tokens/s)"],
    ]
    if baseline is not None:
        rows += [
            ["target-only wall time (measured)", f"{baseline.seconds:.2f} s"],
            ["measured speedup vs target-only", ratio(baseline.seconds, seconds)],
        ]
        if baseline.same_tokens is not None:
            rows.append(["same tokens as target-only", "yes" if baseline.same_tokens else "NO"])
    return rows


class TextTab:
    """The tab's widgets and its one action, ``api_name="text"``."""

    def __init__(self, config: AppConfig):
        self.config = config

    def request(self, prompt, drafter, k, temperature, max_new_tokens, seed) -> TextRequest:
        c = self.config
        check(isinstance(prompt, str) and prompt.strip(), "the prompt is empty: give some code to continue")
        check(len(prompt) <= c.max_prompt_chars, f"the prompt is limited to {c.max_prompt_chars} characters")
        return text_request(c, prompt, drafter, k, temperature, max_new_tokens, seed)

    def generate(self, prompt, drafter, k, temperature, max_new_tokens, seed, compare) -> Iterator[tuple]:
        with user_errors():
            request = self.request(prompt, drafter, k, temperature, max_new_tokens, seed)
            gen = make_generator(self.config, request.settings.drafter, request.settings.num_draft_tokens)
            text = ColouredText(gen.tokenizer, request.prompt)
            run = gen.start(request.prompt, **request.generate_kwargs())  # rounds, not only text
            for step in run.steps():
                text.add(step.emitted[0], origins(step))
                yield text.value(), stats_rows(run.stats)
            if compare:
                yield text.value(), stats_rows(run.stats, run_target_only(self.config, request, text.ids))

    def build(self) -> None:
        d, c = TEXT_DEFAULTS, self.config
        with gr.Row():
            with gr.Column(scale=1):
                prompt = gr.Textbox(value=EXAMPLES[0], lines=5, label="Prompt (Python code)")
                gr.Examples(EXAMPLES, inputs=prompt, label="Example prompts")
                drafter = gr.Radio(DRAFTERS, value=TEXT_DEFAULTS.drafter_for(), label="Drafter")
                k = gr.Slider(1, c.max_draft, value=d.num_draft_tokens, step=1, label="Draft length k")
                temperature = gr.Slider(
                    0, 2, value=d.temperature, step=0.05, label="Temperature (0 = greedy)"
                )
                max_tokens = gr.Slider(
                    1,
                    c.max_new_tokens,
                    value=min(d.max_new_tokens, c.max_new_tokens),
                    step=1,
                    label="Max tokens",
                )
                seed = gr.Number(value=d.seed, precision=0, minimum=0, label="Seed")
                compare = gr.Checkbox(False, label="Also run target-only (measured speedup)")
                button = gr.Button("Generate", variant="primary", elem_id="text-generate")
            with gr.Column(scale=2):
                output = gr.HighlightedText(
                    label="Output (prompt uncoloured)",
                    color_map=COLORS,
                    show_legend=True,
                    elem_id="text-output",
                )
                stats = gr.Dataframe(
                    headers=STATS_HEADERS, label="Statistics", interactive=False, elem_id="text-stats"
                )
        inputs = [prompt, drafter, k, temperature, max_tokens, seed, compare]
        button.click(self.generate, inputs, [output, stats], api_name="text")
