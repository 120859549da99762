"""Fixtures shared by tests/app and tests/reliability: a demo server on tiny random models
(models/text/{target,draft} and models/video in a tmp dir, found through SPECVIDEO_MODELS), served
in-process over real HTTP on a free port. Gradio and diffusers are imported only when used."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

from tests.helpers import perturbed_copy, save_model_dir, tiny_tokenizer

P, SIZE = 2, 16  # context frames and resolution of the tiny video model
MAX_FILE_SIZE = "1mb"


def tiny_video_pipeline(seed: int = 0):
    from specvideo.video import FlowDrafter
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import DiffusionVerifier
    from tests.helpers import tiny_unet

    unet = tiny_unet(SIZE, P, seed)
    return SpeculativeVideoPipeline(DiffusionVerifier(unet), FlowDrafter())


def save_tiny_models(root, video: bool = True):
    tok = tiny_tokenizer(300)
    target = save_model_dir(root / "text" / "target", len(tok), seed=0, tokenizer=tok, logit_scale=4.0)
    perturbed_copy(target, noise=0.3).save_pretrained(root / "text" / "draft")  # accepts some, not all
    if video:
        tiny_video_pipeline().save_pretrained(root / "video")
    return root


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    return save_tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def text_only_models(tmp_path_factory):
    """Like the shipped models/ while the video model is still being trained."""
    return save_tiny_models(tmp_path_factory.mktemp("text-only-models"), video=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(tiny_models):
    """The demo's URL; SPECVIDEO_MODELS points at the tiny models for the whole session."""
    from specvideo.app import APP_DEFAULTS, build_demo, launch

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECVIDEO_MODELS", str(tiny_models))
        config = replace(
            APP_DEFAULTS,
            port=free_port(),
            max_file_size=MAX_FILE_SIZE,
            text_target=str(tiny_models / "text" / "target"),
            text_draft=str(tiny_models / "text" / "draft"),
        )
        demo = build_demo(config)
        _, url, _ = launch(demo, config, prevent_thread_lock=True, quiet=True)
        yield url
        demo.close()


@pytest.fixture(scope="session")
def client(server):
    from gradio_client import Client

    return Client(server, verbose=False)
