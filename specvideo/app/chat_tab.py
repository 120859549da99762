"""The Text tab's chat mode: a gr.Chatbot whose replies stream in, coloured by token origin.

The conversation (plain text, as the chat template needs it) lives in a gr.State; the Chatbot shows
the same turns with each reply's tokens wrapped in coloured spans (accepted draft / correction /
bonus, as in code completion). Each request runs through the target's chat template and stops at
its end-of-turn token.
"""

from __future__ import annotations

import html
from collections.abc import Iterator

import gradio as gr

from specvideo.app.common import STATS_HEADERS, check, user_errors
from specvideo.app.config import AppConfig
from specvideo.app.text_tab import (
    COLORS,
    DRAFTERS,
    ColouredText,
    TextRequest,
    make_generator,
    origins,
    stats_rows,
    text_request,
)
from specvideo.text import TEXT_DEFAULTS

CHAT_EXAMPLES = [
    "How do I read a CSV file in Python?",
    "Explain what a hash table is in two sentences.",
    "Write a Python function that checks whether a word is a palindrome.",
]


def coloured_html(text: ColouredText) -> str:
    """The reply so far as HTML spans (escaped text, whitespace kept)."""
    return "".join(
        f'<span style="color:{COLORS[label]};white-space:pre-wrap">{html.escape(piece)}</span>'
        for piece, label in text.spans
    )


def legend() -> str:
    return " · ".join(f'<span style="color:{color}">■ {name}</span>' for name, color in COLORS.items())


class ChatPanel:
    """The chat widgets and their action, ``api_name="chat"``: (message, history) -> streamed reply."""

    def __init__(self, config: AppConfig):
        self.config = config

    def request(self, message, history, drafter, k, temperature, max_new_tokens, seed) -> TextRequest:
        c = self.config
        check(isinstance(message, str) and message.strip(), "the message is empty: type something to reply to")
        check(len(message) <= c.max_prompt_chars, f"a message is limited to {c.max_prompt_chars} characters")
        check(isinstance(history, list), "the conversation state must be a list of messages")
        messages = [*history, {"role": "user", "content": message.strip()}]
        return text_request(c, messages, drafter, k, temperature, max_new_tokens, seed)

    def reply(self, message, history, shown, drafter, k, temperature, max_new_tokens, seed) -> Iterator[tuple]:
        """Yields (chatbot messages, conversation state, stats, cleared textbox) as tokens arrive."""
        with user_errors():
            history = list(history or [])
            request = self.request(message, history, drafter, k, temperature, max_new_tokens, seed)
            gen = make_generator(self.config, request.settings.drafter, request.settings.num_draft_tokens)
            run = gen.start(request.prompt, **request.generate_kwargs())
            text = ColouredText(gen.tokenizer, "")
            user = request.prompt[-1]
            shown = [*(shown or []), user]
            for step in run.steps():
                text.add(step.emitted[0], origins(step))
                yield [*shown, {"role": "assistant", "content": coloured_html(text)}], history, stats_rows(run.stats), ""
            reply = {"role": "assistant", "content": text.decoded.strip()}
            shown = [*shown, {"role": "assistant", "content": coloured_html(text)}]
            yield shown, [*history, user, reply], stats_rows(run.stats), ""

    def build(self) -> None:
        d, c = TEXT_DEFAULTS, self.config
        history = gr.JSON(value=[], visible=False, label="conversation")  # the plain turns, an API parameter too
        with gr.Row():
            with gr.Column(scale=2):
                chatbot = gr.Chatbot(label="Chat", sanitize_html=False, elem_id="chat-bot", height=420)
                gr.HTML(legend())
                message = gr.Textbox(label="Message", placeholder="Ask something, then press Enter", elem_id="chat-message")
                gr.Examples(CHAT_EXAMPLES, inputs=message, label="Example messages")
                with gr.Row():
                    send = gr.Button("Send", variant="primary", elem_id="chat-send")
                    clear = gr.Button("New conversation")
            with gr.Column(scale=1):
                drafter = gr.Radio(DRAFTERS, value=TEXT_DEFAULTS.drafter_for(), label="Drafter")
                k = gr.Slider(1, c.max_draft, value=d.num_draft_tokens, step=1, label="Draft length k")
                temperature = gr.Slider(0, 2, value=d.temperature, step=0.05, label="Temperature (0 = greedy)")
                max_tokens = gr.Slider(1, c.max_new_tokens, value=min(d.max_new_tokens, c.max_new_tokens), step=1, label="Max tokens")
                seed = gr.Number(value=d.seed, precision=0, minimum=0, label="Seed")
                stats = gr.Dataframe(headers=STATS_HEADERS, label="Statistics", interactive=False, elem_id="chat-stats")
        inputs = [message, history, chatbot, drafter, k, temperature, max_tokens, seed]
        outputs = [chatbot, history, stats, message]
        send.click(self.reply, inputs, outputs, api_name="chat")
        message.submit(self.reply, inputs, outputs, api_name=False)
        clear.click(lambda: ([], [], None), None, [chatbot, history, stats], api_name=False)
