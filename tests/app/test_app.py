"""The demo over real HTTP with gradio_client: both endpoints, defaults, custom settings, errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
import torch
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from specvideo.app import parse_args
from specvideo.app.text_tab import ACCEPTED, BONUS, CORRECTION, origins
from specvideo.app.video_tab import SYNTHETIC_SIZE
from specvideo.core.types import Draft, Step, Verdict
from specvideo.text import SpeculativeGenerator, TextModels
from specvideo.video import probe_video, read_video, write_video
from specvideo.video.config import VIDEO_DEFAULTS
from specvideo.video.data import moving_shapes
from tests.conftest import free_port

# ---------------------------------------------------------------- text


def generated_text(highlighted) -> str:
    return "".join(span["token"] for span in highlighted[1:])


def stats_dict(table) -> dict[str, str]:
    return dict(table["data"])


def test_text_defaults_colour_every_token_by_origin(client, tiny_models):
    highlighted, table = client.predict(api_name="/text")
    assert highlighted[0] == {"token": "def quicksort(arr):", "class_or_confidence": None}
    labels = {span["class_or_confidence"] for span in highlighted[1:]}
    assert labels <= {ACCEPTED, CORRECTION, BONUS} and ACCEPTED in labels  # the draft is a close copy
    stats = stats_dict(table)
    assert stats["tokens generated"] == "128" and "target-only: 128" in stats["target forward passes"]
    # The coloured pieces spell exactly what the library generates (greedy) with the same pair.
    gen = SpeculativeGenerator.from_pretrained(
        str(tiny_models / "text" / "target"), str(tiny_models / "text" / "draft")
    )
    expected = gen.generate("def quicksort(arr):", max_new_tokens=128).text
    assert generated_text(highlighted) == expected.rstrip("\ufffd")


def test_text_ngram_with_target_only_comparison(client):
    highlighted, table = client.predict(
        prompt="for i in range(10):\n    print(i)\nfor i in",
        drafter="ngram",
        k=3,
        max_new_tokens=24,
        compare=True,
        api_name="/text",
    )
    stats = stats_dict(table)
    assert stats["tokens generated"] == "24"
    assert stats["same tokens as target-only"] == "yes"  # greedy speculative decoding is exact
    assert stats["measured speedup vs target-only"].endswith("x")


def test_text_sampling_is_reproducible_by_seed(client):
    kwargs = dict(temperature=0.9, max_new_tokens=16, seed=3, api_name="/text")
    first, _ = client.predict(**kwargs)
    again, _ = client.predict(**kwargs)
    other, _ = client.predict(**{**kwargs, "seed": 4})
    assert first == again and generated_text(first) != generated_text(other)


def test_video_context_keeps_one_frame_more_for_the_checks_reference(tmp_path):
    from specvideo.app.config import AppConfig
    from specvideo.app.video_tab import read_context

    long = write_video(moving_shapes(7, 6, 40), tmp_path / "long.mp4", fps=10)
    short = write_video(moving_shapes(7, 2, 40), tmp_path / "short.mp4", fps=10)
    assert read_context(str(long), 2, AppConfig()).num_frames == 3  # P + 1: the real reference frame
    assert read_context(str(short), 2, AppConfig()).num_frames == 2  # P still suffices


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(k=0), "Value 0 is less than minimum value 1"),
        (dict(k=2.5), "k must be an integer, got 2.5"),
        (dict(max_new_tokens=100_000), "greater than maximum value 256"),
        (dict(prompt="   "), "the prompt is empty"),
        (dict(temperature=-1), "minimum value 0"),
        (dict(prompt="x = 1\n" * 200, max_new_tokens=200), "exceeds the target's context length"),
        (
            dict(drafter="lean"),
            "is not in the list of choices: ['model', 'hybrid', 'head-hybrid', 'head-hybrid-tree', 'ngram']",
        ),
        (dict(drafter="head-hybrid"), "the draft head is trained for the default target"),
    ],
)
def test_text_invalid_inputs_are_clear_errors(client, kwargs, message):
    with pytest.raises(AppError, match=re.escape(message)):
        client.predict(**kwargs, api_name="/text")


def step(num_accepted: int, drafted: int, emitted: int) -> Step:
    draft = Draft(items=torch.zeros(1, drafted, dtype=torch.long), lengths=torch.tensor([drafted]))
    verdict = Verdict(num_accepted=torch.tensor([num_accepted]))
    return Step(0, drafted, draft, verdict, [list(range(emitted))], torch.tensor([True]))


def test_app_model_drafter_uses_the_ranked_draft_vocabulary(tmp_path, monkeypatch):
    """The app's lean drafters propose the FR-Spec vocabulary of the ranking beside their draft."""
    from dataclasses import replace

    from specvideo.app import APP_DEFAULTS, text_tab
    from specvideo.text.models.vocab import save_token_ranking
    from tests.conftest import save_tiny_models

    root = save_tiny_models(tmp_path, video=False)
    target, draft = root / "text" / "target", root / "text" / "draft"
    config = replace(APP_DEFAULTS, text_target=str(target), text_draft=str(draft))
    assert text_tab.make_generator(config, "model", 3).runner.vocab is None  # no ranking beside the draft
    vocab_size = text_tab.make_generator(config, "ngram", 3).target.config.vocab_size
    save_token_ranking(draft, list(range(vocab_size - 1, -1, -1)), "test")
    ranked = TextModels.from_pretrained(str(target), str(draft), drafter="hybrid")
    monkeypatch.setattr(text_tab, "load_models", lambda *paths: ranked)
    monkeypatch.setattr(text_tab, "TEXT_DEFAULTS", text_tab.TEXT_DEFAULTS.updated(draft_vocab_size=50))
    gen = text_tab.make_generator(config, "model", 3)
    assert gen.config.drafter == "lean" and gen.runner.vocab.tolist() == list(range(vocab_size - 50, vocab_size))
    plain = text_tab.make_generator(config, "none", 3).generate("def f(x):", max_new_tokens=8, stop=None)
    assert gen.generate("def f(x):", max_new_tokens=8, stop=None).token_ids == plain.token_ids
    hybrid = text_tab.make_generator(config, "hybrid", 3)  # prompt lookup, else the same lean drafter
    assert hybrid.config.drafter == "hybrid" and hybrid.runner.vocab.tolist() == gen.runner.vocab.tolist()
    assert hybrid.generate("def f(x):", max_new_tokens=8, stop=None).token_ids == plain.token_ids


def test_chat_streams_a_reply_and_keeps_the_conversation(client, tiny_models):
    shown, history, table = client.predict(
        message="hello there", history=[], shown=[], max_new_tokens=12, api_name="/chat"
    )[:3]
    assert [m["role"] for m in history] == ["user", "assistant"] and history[0]["content"] == "hello there"
    content = shown[-1]["content"]  # gradio 6 sends [{"text", "type"}]
    content = "".join(c["text"] for c in content) if isinstance(content, list) else content
    assert "<span style=" in content  # coloured by origin
    gen = SpeculativeGenerator.from_pretrained(
        str(tiny_models / "text" / "target"), str(tiny_models / "text" / "draft")
    )
    expected = gen.generate([{"role": "user", "content": "hello there"}], max_new_tokens=12).text
    assert history[1]["content"] == expected.strip()
    shown2, history2, _ = client.predict(
        message="and again", history=history, shown=shown, max_new_tokens=8, api_name="/chat"
    )[:3]
    assert len(history2) == 4 and history2[:2] == history
    assert stats_dict(table)["tokens generated"].isdigit()


def test_chat_rejects_an_empty_message(client):
    with pytest.raises(AppError, match="the message is empty"):
        client.predict(message="  ", history=[], shown=[], api_name="/chat")


def test_token_origins_per_round():
    assert origins(step(2, 4, 3)) == [ACCEPTED, ACCEPTED, CORRECTION]
    assert origins(step(4, 4, 5)) == [ACCEPTED] * 4 + [BONUS]
    assert origins(step(0, 0, 1)) == [CORRECTION]  # nothing drafted: the target's own token
    assert origins(step(4, 4, 2)) == [ACCEPTED] * 2  # cut by max tokens or end of sequence


# ---------------------------------------------------------------- video


def test_video_defaults_use_the_synthetic_example(client):
    generated, sbs, plot, table = client.predict(api_name="/video")
    for path in (generated, sbs):
        info = probe_video(path)
        assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
    side = SYNTHETIC_SIZE  # generated at the example clip's own size, not the UNet's
    assert read_video(generated).frames.shape == (16, side, side, 3)
    assert read_video(sbs).frames.shape == (16, side, 3 * side, 3)  # context | draft | final
    assert plot["type"] == "matplotlib" and plot["plot"].startswith("data:image/")
    stats = stats_dict(table)
    assert (
        stats["frames generated"] == "16"
        and f"target-only: {16 * VIDEO_DEFAULTS.num_inference_steps}" in stats["UNet evaluations"]
    )


def test_video_upload_custom_settings_and_target_only(client, tmp_path):
    clip = write_video(moving_shapes(7, 6, 40), tmp_path / "clip.mp4", fps=10)
    generated, _, _, table = client.predict(
        video=handle_file(str(clip)),
        drafter="linear",
        num_frames=6,
        k=3,
        threshold=0,  # PSNR >= 0 dB always: every draft is accepted
        metric="psnr",
        strength=0.5,
        steps=3,
        seed=1,
        compare=True,
        api_name="/video",
    )
    assert read_video(generated).num_frames == 6
    stats = stats_dict(table)
    assert stats["drafts accepted"] == "6 / 6" and stats["acceptance rate"] == "100.0%"
    m = VIDEO_DEFAULTS.num_refine_steps  # the app's m refinement steps per frame
    assert stats["UNet evaluations"] == f"{6 * m} (target-only: 18)"
    assert stats["estimated speedup (UNet evaluations)"] == f"{18 / (6 * m):.2f}x"
    assert stats["target-only wall time (measured)"].endswith("(18 UNet evaluations)")
    assert stats["measured speedup vs target-only"].endswith("x")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(k=0), "Value 0 is less than minimum value 1"),
        (dict(num_frames=1000), "greater than maximum value 64"),
        (dict(strength=0), "less than minimum value 0.05"),
        (dict(drafter="learned"), "drafter 'learned' needs trained weights in"),
        (dict(example="nope.mp4"), "Value: nope.mp4 is not in the list of choices"),
    ],
)
def test_video_invalid_settings_are_clear_errors(client, kwargs, message):
    with pytest.raises(AppError, match=re.escape(message)):
        client.predict(**kwargs, api_name="/video")


def test_video_a_text_file_is_a_clear_error(client, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a video\n")
    with pytest.raises(AppError, match="notes.txt: ffmpeg found no video stream"):
        client.predict(video=handle_file(str(path)), api_name="/video")


def test_uploads_over_the_size_limit_are_refused(client, tmp_path):
    path = tmp_path / "big.mp4"
    path.write_bytes(os.urandom(2 * 1024 * 1024))  # the test server allows 1 MB
    with pytest.raises(ValueError, match="exceeds the maximum file size of 1048576 bytes"):
        client.predict(video=handle_file(str(path)), api_name="/video")


def test_without_a_video_model_text_works_and_video_says_why(client, text_only_models, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_MODELS", str(text_only_models))
    with pytest.raises(AppError, match="no shipped model at .*video"):
        client.predict(api_name="/video")
    highlighted, _ = client.predict(max_new_tokens=8, api_name="/text")
    assert generated_text(highlighted)


# ---------------------------------------------------------------- serving


def test_flags_override_the_environment(monkeypatch):
    monkeypatch.setenv("SPECVIDEO_PORT", "8123")
    monkeypatch.setenv("SPECVIDEO_MAX_FRAMES", "12")
    assert parse_args([]).port == 8123 and parse_args([]).max_frames == 12
    config = parse_args(["--host", "0.0.0.0", "--port", "9000", "--max-file-size", "5mb"])
    assert (config.host, config.port, config.max_file_size) == ("0.0.0.0", 9000, "5mb")
    monkeypatch.setenv("SPECVIDEO_PORT", "eighty")
    with pytest.raises(ValueError, match="SPECVIDEO_PORT='eighty' is not a valid int"):
        parse_args([])


def test_python_app_py_serves_on_the_given_port(text_only_models):
    port = free_port()
    env = {**os.environ, "SPECVIDEO_MODELS": str(text_only_models), "SPECVIDEO_PORT": str(port)}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--host", "127.0.0.1"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        page = _wait_for(f"http://127.0.0.1:{port}/", proc)
        assert "specvideo" in page
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_for(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"app.py exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.read().decode()
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"app.py did not serve {url} within {timeout} s")
