"""The demo's page and server: ``build_demo()`` assembles the tabs, ``main()`` serves them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace

import gradio as gr

from specvideo.app.chat_tab import ChatPanel
from specvideo.app.config import AppConfig, from_env
from specvideo.app.text_tab import TextTab
from specvideo.app.video_tab import VideoTab
from specvideo.text.models.precision import DTYPES

INTRO = """# specvideo: speculative generation
A cheap drafter proposes k items ahead, an expensive model checks them all in one batched pass;
what passes is kept, the rest is corrected. **Video**: a frame predictor drafts frames and a
conditional diffusion model checks them all in one batched pass: each draft is noised and
denoised, and one the model finds typical of the clip (its denoising error within the band set by
τ) is kept as drafted; the first rejected one is regenerated from noise. **Text**: a small draft LM (or an
n-gram lookup) drafts tokens that the target LM (SmolLM2-135M-Instruct by default) verifies
exactly, for code completion or chat."""


def limits_text(c: AppConfig) -> str:
    return (
        f"Limits: uploads up to {c.max_file_size}, at most {c.max_pixels:,} pixels per frame; "
        f"{c.max_frames} frames, {c.max_steps} steps and k ≤ {c.max_draft} per request; "
        f"{c.max_new_tokens} new tokens and {c.max_prompt_chars} prompt characters; "
        f"{c.queue_size} requests may wait in the queue."
    )


def build_demo(config: AppConfig | None = None) -> gr.Blocks:
    """The two-tab demo, queued. Models load on the first request that needs them."""
    config = config or from_env()
    age = config.cache_max_age_s
    with gr.Blocks(
        title="specvideo",
        analytics_enabled=False,  # offline: no telemetry
        delete_cache=(age, age),  # every `age` s, uploads and outputs older than `age` s are deleted
    ) as demo:
        gr.Markdown(INTRO)
        gr.Markdown(limits_text(config), elem_id="limits")
        with gr.Tabs():
            with gr.Tab("Video", id="video"):
                VideoTab(config).build()
            with gr.Tab("Text", id="text"):
                with gr.Tabs():
                    with gr.Tab("Code completion", id="text-complete"):
                        TextTab(config).build()
                    with gr.Tab("Chat", id="text-chat"):
                        ChatPanel(config).build()
    return demo.queue(default_concurrency_limit=config.concurrency, max_size=config.queue_size)


def launch(demo: gr.Blocks, config: AppConfig, **kwargs):
    """Serve with the config's address and upload limit (``kwargs`` go to ``launch``)."""
    return demo.launch(
        server_name=config.host, server_port=config.port, max_file_size=config.max_file_size, **kwargs
    )


def parse_args(argv: Sequence[str] | None = None) -> AppConfig:
    config = from_env()
    parser = argparse.ArgumentParser(
        prog="app.py",
        description="The specvideo web demo. Every limit can also be set as SPECVIDEO_<NAME> (e.g. SPECVIDEO_MAX_FRAMES).",
    )
    parser.add_argument("--host", default=config.host, help="address to bind (env SPECVIDEO_HOST)")
    parser.add_argument("--port", type=int, default=config.port, help="port (env SPECVIDEO_PORT)")
    parser.add_argument(
        "--max-file-size",
        default=config.max_file_size,
        help="upload limit, e.g. 50mb (env SPECVIDEO_MAX_FILE_SIZE)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=config.text_dtype,
        help="text models' number format (auto: a GGUF-sourced model's own blocks, else bfloat16 where the CPU "
        "has bf16 units; env SPECVIDEO_TEXT_DTYPE)",
    )
    args = parser.parse_args(argv)
    return replace(config, host=args.host, port=args.port, max_file_size=args.max_file_size, text_dtype=args.dtype)


def main(argv: Sequence[str] | None = None) -> None:
    from specvideo.cli import quiet_libraries as _quiet_libraries

    try:
        config = parse_args(argv)
    except ValueError as err:  # a malformed SPECVIDEO_* variable
        raise SystemExit(f"app.py: error: {err}") from None
    _quiet_libraries()
    launch(build_demo(config), config)


__all__ = ["build_demo", "launch", "main", "parse_args"]
