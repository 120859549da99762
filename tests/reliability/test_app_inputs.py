"""Bad-input matrix for the web demo (docs/RELIABILITY.md), through the launched app over HTTP.

Every bad input comes back as one clear message: a gr.Error, which gradio_client raises as AppError
with that text (raw HTTP: an ``error`` event carrying it), never a traceback; and the server keeps
serving afterwards. Odd but valid files (grayscale, RGBA, odd and large sizes, long clips) work.
Inputs gradio_client cannot send (NaN, lone surrogates, invalid UTF-8) go as raw HTTP requests.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from specvideo.video import read_video, write_video
from tests.reliability.test_video_inputs import H264, _lavfi
from tests.video.test_io import smooth_frames

FAST = dict(num_frames=2, steps=2, refine_steps=1)  # the cheapest video request
SYNTHETIC = "moving shapes (synthetic)"


# ----------------------------------------------------------------------------------- helpers


def raw_call(server: str, api: str, body: bytes) -> tuple[str, object]:
    """POST a JSON body to /gradio_api/call/<api> and read the result stream: (last event, its
    data). A request the server refuses to parse gives ("http <status>", the response text)."""
    request = urllib.request.Request(
        f"{server}gradio_api/call/{api}", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            event_id = json.loads(response.read())["event_id"]
    except urllib.error.HTTPError as err:
        return f"http {err.code}", err.read().decode()
    with urllib.request.urlopen(f"{server}gradio_api/call/{api}/{event_id}", timeout=300) as response:
        events = re.findall(r"event: (\w+)\ndata: (.*)", response.read().decode())
    event, data = events[-1]
    return event, json.loads(data)


def video_body(**changes) -> bytes:
    """The /video arguments in order, with Python literals: NaN goes out as JSON's NaN token."""
    args = dict(
        video=None,
        example=SYNTHETIC,
        drafter="flow",
        num_frames=2,
        k=2,
        threshold=0.5,
        metric="ssim",
        strength=0.5,
        steps=2,
        refine_steps=1,
        seed=0,
        compare=False,
    )
    return json.dumps({"data": list({**args, **changes}.values())}).encode()


def text_body(prompt_json: str) -> bytes:
    """The /text arguments with the prompt as raw JSON text (an escape such as \\ud800 stays as is)."""
    return b'{"data": [' + prompt_json.encode() + b', "model", 2, 0, 4, 0, false]}'


def assert_clear(message: str, expected: str) -> None:
    assert expected in message, message
    assert "Traceback" not in message and 'File "' not in message, message
    assert not message.startswith("'"), message  # the message, not the repr of an exception


@pytest.fixture(autouse=True)
def still_serving(client):
    """After every bad input the server answers a normal request."""
    yield
    highlighted, _ = client.predict(max_new_tokens=2, api_name="/text")
    assert len(highlighted) >= 2


# ------------------------------------------------------------------------------- video files


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


def _truncated(tmp: Path) -> Path:
    data = write_video(smooth_frames(6), tmp / "whole.mp4", fps=10).read_bytes()
    (tmp / "cut.mp4").write_bytes(data[: int(len(data) * 0.6)])
    return tmp / "cut.mp4"


@dataclass(frozen=True)
class Upload:
    id: str
    make: Callable[[Path], Path]
    message: str | None  # None: the request works


UPLOADS = [
    Upload("zero-bytes", _write("empty.mp4", b""), "empty.mp4: "),
    Upload("text-named-mp4", _write("notes.mp4", b"this is not a video\n" * 20), "notes.mp4: "),
    Upload("truncated-mp4", _truncated, "cut.mp4: "),
    Upload(
        "one-frame",
        lambda tmp: write_video(smooth_frames(1), tmp / "single.mp4", fps=10),
        "the video has 1 frame(s); the model needs 2 context frames",
    ),
    Upload(
        "huge-3840x2160",
        _lavfi("huge.mp4", "3840x2160", *H264),
        "the video is 3840x2160; the demo takes at most 2073600 pixels per frame",
    ),
    Upload("grayscale", _lavfi("gray.mkv", "64x48", "-pix_fmt", "gray", "-c:v", "ffv1"), None),
    Upload("rgba", _lavfi("rgba.mov", "64x48", "-pix_fmt", "rgba", "-c:v", "png"), None),
    Upload("odd-97x61", _lavfi("odd.mkv", "97x61", "-pix_fmt", "rgb24", "-c:v", "ffv1"), None),
    Upload("full-hd-1920x1080", _lavfi("hd.mp4", "1920x1080", *H264), None),  # downscaled on decode
    Upload("long-600-frames", _lavfi("long.mp4", "48x32", *H264, frames=600, rate=25), None),
]


# (H, W) of the continuation: the upload's own, downscaled to VIDEO_DEFAULTS.max_side (320) on decode,
# odd sides padded to even by the H.264 writer
OUTPUT_SIZES = {
    "grayscale": (48, 64),
    "rgba": (48, 64),
    "odd-97x61": (62, 98),
    "full-hd-1920x1080": (180, 320),
    "long-600-frames": (32, 48),
}


@pytest.mark.parametrize("case", UPLOADS, ids=lambda c: c.id)
def test_video_upload(case, client, tmp_path):
    path = case.make(tmp_path)
    call = dict(video=handle_file(str(path)), **FAST, api_name="/video")
    if case.message is None:
        generated, _, _, _ = client.predict(**call)
        assert read_video(generated).frames.shape == (2, *OUTPUT_SIZES[case.id], 3)
        return
    with pytest.raises(AppError) as info:
        client.predict(**call)
    assert_clear(str(info.value), case.message)
    assert "gradio" not in str(info.value)  # the user's file name, not the server's upload path


# ------------------------------------------------------------------------------- video settings

BAD_SETTINGS = [
    (dict(num_frames=0), "Value 0 is less than minimum value 1"),
    (dict(num_frames=-3), "Value -3 is less than minimum value 1"),
    (dict(num_frames=65), "Value 65 is greater than maximum value 64"),
    (dict(num_frames=2.5), "number of frames must be an integer, got 2.5"),
    (dict(k=0), "Value 0 is less than minimum value 1"),
    (dict(k=17), "Value 17 is greater than maximum value 16"),
    (dict(strength=0), "Value 0 is less than minimum value 0.05"),
    (dict(strength=1.5), "Value 1.5 is greater than maximum value 1"),
    (dict(steps=0), "Value 0 is less than minimum value 1"),
    (dict(refine_steps=0), "Value 0 is less than minimum value 1"),
    (dict(steps=101), "Value 101 is greater than maximum value 100"),
    (dict(metric="mse"), "Value: 'mse' (type: <class 'str'>) is not in the list of choices"),
]


@pytest.mark.parametrize(
    "changes,message",
    [pytest.param(*case, id=",".join(f"{k}={v}" for k, v in case[0].items())) for case in BAD_SETTINGS],
)
def test_video_setting_out_of_range(changes, message, client):
    with pytest.raises(AppError) as info:
        client.predict(**{**FAST, **changes}, api_name="/video")
    assert_clear(str(info.value), message)


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(threshold=float("nan")), "threshold must be a number (+/-inf allowed), got nan"),
        (dict(strength=float("nan")), "strength must be in (0, 1], got nan"),
    ],
    ids=["threshold-nan", "strength-nan"],
)
def test_video_nan_setting(changes, message, server):
    """gradio_client refuses to send NaN (strict JSON); a raw request can."""
    event, data = raw_call(server, "video", video_body(**changes))
    assert event == "error"
    assert_clear(data["error"], message)


# --------------------------------------------------------------------------------------- text


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(prompt=""), "the prompt is empty: give some code to continue"),
        (dict(prompt=" \n\t"), "the prompt is empty: give some code to continue"),
        (dict(prompt="x = 1\n" * 200, max_new_tokens=200), "exceeds the target's context length of 256"),
        (dict(prompt="x" * 4001), "the prompt is limited to 4000 characters"),
        (dict(max_new_tokens=0), "Value 0 is less than minimum value 1"),
        (dict(max_new_tokens=-5), "Value -5 is less than minimum value 1"),
        (dict(max_new_tokens=257), "Value 257 is greater than maximum value 256"),
        (dict(k=0), "Value 0 is less than minimum value 1"),
    ],
    ids=[
        "empty",
        "blank",
        "beyond-context",
        "too-long",
        "max-tokens-0",
        "max-tokens-neg",
        "max-tokens-big",
        "k-0",
    ],
)
def test_text_bad_input(changes, message, client):
    with pytest.raises(AppError) as info:
        client.predict(**changes, api_name="/text")
    assert_clear(str(info.value), message)


def test_text_lone_surrogate_is_invalid_utf8(server):
    """JSON can carry a lone surrogate (\\ud800) that no UTF-8 encoder accepts."""
    event, data = raw_call(server, "text", text_body('"def \\ud800(x):"'))
    assert event == "error"
    assert_clear(data["error"], "prompt is not valid UTF-8: '\\ud800' at position 4 (surrogates not allowed)")


def test_text_invalid_utf8_bytes_are_refused_before_the_app(server):
    event, data = raw_call(server, "text", text_body('"def \xff(x):"').replace(b"\xc3\xbf", b"\xff"))
    assert event == "http 400"
    assert_clear(data, "There was an error parsing the body")
