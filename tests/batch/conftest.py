"""Tiny models on disk and a folder of clips for the batch tests (workers load models from paths)."""

import json

import numpy as np
import pytest

from specvideo.video.data import moving_shapes
from specvideo.video.io import write_video
from tests.conftest import save_tiny_models

VIDEO_SETTINGS = dict(num_frames=3, num_inference_steps=2, num_draft_frames=2, threshold=0.2, strength=0.6)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return save_tiny_models(tmp_path_factory.mktemp("batch-models"))


@pytest.fixture
def clips(tmp_path):
    """Four clips, the third corrupt (not a video at all)."""
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(4):
        path = folder / f"clip{i}.mp4"
        if i == 2:
            path.write_bytes(b"this is not a video" * 10)
        else:
            write_video(moving_shapes(i, 4, 16), path, fps=8)
    return folder


@pytest.fixture
def prompts(tmp_path):
    lines = [
        {"prompt": "def f(x):"},
        {"prompt": "class A:", "max_new_tokens": 4},
        "this line is not JSON",
        {"prompt": "import os", "temperature": 0.8, "seed": 3},
        {"messages": [{"role": "user", "content": "hi"}]},  # through the tiny tokenizer's chat template
        {"prompt": "x = 1"},
    ]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def frames_of(path) -> np.ndarray:
    from specvideo.video.io import read_video

    return read_video(path).frames
