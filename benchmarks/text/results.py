"""Aggregated results of the text benchmark: one row per workload x method x temperature, and the
issue's targets checked on them."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.measure import median_ratio, spread
from benchmarks.text.config import PEER_FAMILIES, TARGETS
from benchmarks.text.prompts import BenchPrompt


@dataclass
class MethodResult:
    """One method at one temperature on one workload, over its prompts and repeats.

    speedup_vs_*: per repeat the median over prompts of time(baseline) / time(method); the value is
    the median over repeats, ``*_spread`` its (min, max)."""

    method: str
    family: str
    temperature: float
    workload: str = "code"
    drafter: str | None = None
    schedule: str | None = None
    k: int | None = None
    tokens_per_s: float = 0.0  # median over prompts and repeats
    speedup_vs_hf: float | None = None
    speedup_vs_hf_spread: tuple[float, float] | None = None
    speedup_vs_loop: float | None = None
    acceptance_rate: float | None = None  # accepted / drafted over all runs (ours)
    position_acceptance: list[float] | None = None  # per draft position (tree depth), over all runs
    tokens_per_target_call: float | None = None  # generated tokens / target forward calls
    target_calls: float | None = None  # mean target forward calls per run
    exact_match: float | None = None  # greedy: fraction of runs token-identical to hf-target's
    exact_vs_loop: float | None = None  # greedy: ... to our own target-only loop's (same verifier)
    # greedy runs that differ from hf-target's: the float32 target's logit gap between the two
    # tokens at the first differing position, once per prompt (benchmarks.text.divergence)
    tie_margins: list[float] | None = None
    # ours: wall ms per round, mean over every round of every run: draft, target forward, the rest
    # of the check (acceptance, correction), bookkeeping (commit, caches, stats) and the total
    round_ms: dict[str, float] | None = None
    times_s: list[float] = field(default_factory=list)
    repeat: list[int] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    new_tokens: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TargetCheck:
    key: str
    description: str
    threshold: float
    value: float | None
    detail: str
    workload: str = "code"
    spread: tuple[float, float] | None = None

    @property
    def reached(self) -> bool | None:
        return None if self.value is None else self.value >= self.threshold

    def line(self) -> str:
        where = f"{self.workload}: {self.description} >= {self.threshold:g}"
        if self.value is None:
            return f"{where}: not measured ({self.detail})"
        verdict = "reached" if self.reached else "NOT reached"
        band = f" [{self.spread[0]:.2f}-{self.spread[1]:.2f}]" if self.spread else ""
        return f"{where}: {verdict} ({self.value:.2f}{band}, {self.detail})"


@dataclass
class BenchResults:
    rows: list[MethodResult]
    prompts: list[BenchPrompt]
    settings: dict[str, Any]
    machine: dict[str, Any]

    def row(self, method: str, temperature: float, workload: str | None = None) -> MethodResult | None:
        return next(
            (r for r in self.rows if r.method == method and r.temperature == temperature
             and (workload is None or r.workload == workload)),
            None,
        )

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(r.workload for r in self.rows))

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "machine": self.machine,
            "prompts": [{**asdict(p), "chat": p.chat} for p in self.prompts],
            "rows": [asdict(r) for r in self.rows],
            "targets": [{**asdict(t), "reached": t.reached} for t in check_targets(self)],
        }


def aggregate(method, workload: str, temperature: float, records) -> MethodResult:
    rec = records[(workload, method.name, temperature)]
    times, tokens, calls, stats = rec["times"], rec["tokens"], rec["calls"], rec["stats"]
    row = MethodResult(
        method=method.name, family=method.family, temperature=temperature, workload=workload,
        drafter=method.drafter, schedule=method.schedule, k=method.k,
        tokens_per_s=statistics.median(len(t) / s for t, s in zip(tokens, times)),
        times_s=list(times), repeat=list(rec["repeat"]), prompt=list(rec["prompt"]),
        new_tokens=[len(t) for t in tokens], calls=list(calls),
    )
    hf = records.get((workload, "hf-target", temperature))
    row.speedup_vs_hf, row.speedup_vs_hf_spread = speedup(hf, rec)
    row.speedup_vs_loop, _ = speedup(our_target_record(records, workload, method.name, temperature), rec)
    row.target_calls = statistics.fmean(calls)
    row.tokens_per_target_call = sum(row.new_tokens) / sum(calls) if sum(calls) else None
    if all(s is not None for s in stats):
        drafted = sum(s.drafted for s in stats)
        row.acceptance_rate = sum(s.accepted for s in stats) / drafted if drafted else None
        depth = max((len(s.position_drafted) for s in stats), default=0)
        seen = [sum(s.position_drafted[i] for s in stats if i < len(s.position_drafted)) for i in range(depth)]
        kept = [sum(s.position_accepted[i] for s in stats if i < len(s.position_accepted)) for i in range(depth)]
        row.position_acceptance = [a / d for a, d in zip(kept, seen) if d] or None
        row.round_ms = round_split(stats)
    if temperature == 0 and hf is not None and method.family not in PEER_FAMILIES:  # peers: their own quantized weights
        row.exact_match = statistics.fmean(float(a == b) for a, b in zip(tokens, hf["tokens"]))
    loop = our_target_record(records, workload, method.name, temperature)
    if temperature == 0 and loop is not None and method.family not in PEER_FAMILIES:
        row.exact_vs_loop = statistics.fmean(float(a == b) for a, b in zip(tokens, loop["tokens"]))
    return row


def round_split(stats) -> dict[str, float] | None:
    """Mean wall ms per round of draft / target forward / rest of the check / bookkeeping / total."""
    rounds = sum(s.rounds for s in stats)
    if not rounds:
        return None
    total = {k: sum(getattr(s, f"time_{k}") for s in stats) for k in ("draft", "forward", "verify", "correct", "total")}
    parts = {
        "draft": total["draft"],
        "forward": total["forward"],
        "check": total["verify"] + total["correct"] - total["forward"],
        "bookkeeping": total["total"] - total["draft"] - total["verify"] - total["correct"],
        "total": total["total"],
    }
    return {k: round(1e3 * v / rounds, 2) for k, v in parts.items()}


def tie_margins(rec: dict, hf: dict, prompt_ids: list, model) -> list[float]:
    """The float32 ``model``'s logit gap at the first token where a run differs from hf-target's run
    of the same prompt and repeat, once per prompt."""
    from benchmarks.text.divergence import divergence

    margins = {}
    for index, ours, theirs in zip(rec["prompt"], rec["tokens"], hf["tokens"]):
        if ours != theirs and index not in margins:
            where = divergence(model, prompt_ids[index][0].tolist(), ours, theirs)
            if where is not None:
                margins[index] = where[1]
    return [margins[i] for i in sorted(margins)]


def our_target_record(records, workload: str, name: str, temperature: float) -> dict | None:
    """Our loop without a draft, run by the same verifier as ``name`` ("+lean" or not, else the other;
    a weight-only row "+int4" / "+int8": its own format's only, the other formats decode other tokens)."""
    suffix = "+" + name.rpartition("+")[2] if "+" in name else ""
    others = ("ours-target+lean", "ours-target") if suffix in ("", "+lean") else ()
    for candidate in dict.fromkeys((f"ours-target{suffix}", *others)):
        if (workload, candidate, temperature) in records:
            return records[(workload, candidate, temperature)]
    return None


def speedup(baseline: dict | None, rec: dict) -> tuple[float | None, tuple[float, float] | None]:
    """Median over repeats of (median over prompts of baseline time / time), and its spread."""
    if baseline is None:
        return None, None
    per_repeat = []
    for r in sorted(set(rec["repeat"])):
        mine = [t for t, rr in zip(rec["times"], rec["repeat"]) if rr == r]
        theirs = [t for t, rr in zip(baseline["times"], baseline["repeat"]) if rr == r]
        value = median_ratio(theirs, mine)
        if value is not None:
            per_repeat.append(value)
    if not per_repeat:
        return None, None
    return statistics.median(per_repeat), spread(per_repeat)


def paired_speedup(fast: MethodResult, slow: MethodResult) -> tuple[float | None, tuple[float, float] | None]:
    """``fast`` against ``slow`` (both of one workload and temperature), as ``speedup`` does."""
    return speedup(
        {"times": slow.times_s, "repeat": slow.repeat},
        {"times": fast.times_s, "repeat": fast.repeat},
    )


def best_row(results: BenchResults, workload: str, temperature: float, families) -> MethodResult | None:
    rows = [r for r in results.rows if r.workload == workload and r.temperature == temperature
            and r.family in families and r.speedup_vs_hf is not None]
    return max(rows, key=lambda r: r.speedup_vs_hf) if rows else None


def check_targets(results: BenchResults) -> list[TargetCheck]:
    """The issue's targets per workload, on the fastest of our draft-model rows (by speedup over HF
    target-only); with one configuration per run (the held-out split) that is the chosen one."""
    temperatures = results.settings.get("temperatures", [0.0])
    sampled_t = next((t for t in temperatures if t > 0), None)
    checks = []
    for workload in results.workloads:
        greedy = best_row(results, workload, 0.0, ("ours-draft",))
        hf_spec = best_row(results, workload, 0.0, ("hf-assisted", "hf-lookup"))
        sampled = best_row(results, workload, sampled_t, ("ours-draft",)) if sampled_t is not None else None
        for key, description, thresholds in TARGETS:
            threshold = thresholds.get(workload, thresholds["code"])
            value = band = None
            detail = "no draft-model row"
            if key == "greedy_vs_hf" and greedy is not None:
                value, band, detail = greedy.speedup_vs_hf, greedy.speedup_vs_hf_spread, greedy.method
            elif key == "greedy_vs_hf_speculative" and greedy is not None:
                detail = "no HF speculative row"
                if hf_spec is not None:
                    value, band = paired_speedup(greedy, hf_spec)
                    detail = f"{greedy.method} vs {hf_spec.method}"
            elif key == "sampled_vs_hf":
                description = f"T={sampled_t:g} speedup over HF target-only generate()" if sampled_t else description
                if sampled is not None:
                    value, band, detail = sampled.speedup_vs_hf, sampled.speedup_vs_hf_spread, sampled.method
            checks.append(TargetCheck(key, description, threshold, value, detail, workload, band))
    return checks


def assistant_settings(draft) -> dict[str, Any] | None:
    """What transformers' assisted generation keeps of the draft's generation config."""
    if draft is None:
        return None
    config = draft.generation_config
    defaults = config._get_default_generation_params() if hasattr(config, "_get_default_generation_params") else {}
    out = {}
    for name in ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold"):
        value = getattr(config, name, None)
        out[name] = defaults.get(name) if value is None else value
    try:
        import sklearn  # noqa: F401  (transformers adapts the confidence threshold only with scikit-learn)

        out["adaptive_confidence_threshold"] = True
    except ImportError:
        out["adaptive_confidence_threshold"] = False
    return out
