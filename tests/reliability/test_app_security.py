"""The web demo reads and serves only what it should (docs/RELIABILITY.md, "App security").

No endpoint reads a server path it was not given as an upload, the file route serves nothing
outside gradio's cache, model directories come only from the operator (SPECVIDEO_MODELS), uploads
over the limit are refused, and per-request files on disk stay bounded.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from specvideo.app import APP_DEFAULTS, build_demo, launch
from specvideo.app.common import SCRATCH_KEEP, scratch_root
from specvideo.video import write_video
from tests.conftest import free_port
from tests.reliability.test_app_inputs import FAST, raw_call, video_body
from tests.video.test_io import smooth_frames

REPO = Path(__file__).resolve().parents[2]
PASSWD = Path("/etc/passwd")


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture(scope="module")
def server_video(tmp_path_factory) -> Path:
    """A valid video on the server's disk that was never uploaded: if read, the request would work."""
    return write_video(smooth_frames(4), tmp_path_factory.mktemp("private") / "private.mp4", fps=10)


def server_paths(server_video: Path) -> list[str]:
    return [
        str(PASSWD),
        str(server_video),
        str(REPO / "pyproject.toml"),
        "pyproject.toml",
        "../../etc/passwd",
    ]


# ------------------------------------------------------------ (a) the video endpoint's input


def test_video_endpoint_refuses_server_paths_as_file_data(server, server_video):
    for path in server_paths(server_video):
        for video in ({"path": path, "meta": {"_type": "gradio.FileData"}}, path):
            event, data = raw_call(server, "video", video_body(video=video))
            assert event == "error", (path, data)
            # gradio refused it before the app ran: the app's own errors always carry a message
            assert data["error"] is None, (path, data)


def test_video_endpoint_refuses_a_path_string_from_gradio_client(client, server_video):
    with pytest.raises(AppError):  # gradio's own refusal: no detail without show_error
        client.predict(video=str(server_video), **FAST, api_name="/video")


def test_video_endpoint_does_not_fetch_urls_on_the_server(server):
    """A FileData URL to a private address (here the server itself) is not downloaded."""
    url = f"{server}gradio_api/info"
    event, data = raw_call(
        server, "video", video_body(video={"path": url, "meta": {"_type": "gradio.FileData"}})
    )
    assert event == "error" and data["error"] is None  # not downloaded, so the app never ran


# ------------------------------------------------------------------- (b) the file route


def test_file_route_serves_no_server_files(server, server_video, tiny_models):
    targets = [
        *server_paths(server_video),
        str(tiny_models / "text" / "target" / "config.json"),
        str(REPO / "models" / "text" / "target" / "config.json"),
        str(REPO / "specvideo" / "app" / "config.py"),
        str(scratch_root() / "moving-shapes.mp4"),  # the app's own scratch files, before gradio copies them
    ]
    for target in targets:
        for prefix in ("gradio_api/file=", "file="):
            for spelled in (target, urllib.parse.quote(target, safe="")):
                status, body = http_get(server + prefix + spelled)
                assert status in (403, 404), (prefix, spelled, status)
                assert b"root:" not in body and b"[project]" not in body and b"vocab_size" not in body


def test_file_route_serves_the_outputs_of_a_request(server):
    """The positive control: what a request returned is served (from gradio's cache)."""
    event, data = raw_call(server, "video", video_body())
    assert event == "complete"
    status, body = http_get(data[0]["url"])
    assert status == 200 and body[4:8] == b"ftyp"  # an MP4


# --------------------------------------------------------------- (c) model directories


def test_no_endpoint_takes_a_model_directory(client):
    info = client.view_api(print_info=False, return_format="dict")
    endpoints = info["named_endpoints"]
    assert sorted(endpoints) == ["/chat", "/text", "/video"]  # show_example is private
    names = {p["parameter_name"] for e in endpoints.values() for p in e["parameters"]}
    assert not names & {"model", "model_dir", "target", "draft", "path", "models"}
    video = {p["parameter_name"]: p for p in endpoints["/video"]["parameters"]}
    assert video["video"]["python_type"]["type"] == "filepath"  # an upload, never a server path
    example_choices = video["example"]["type"]["enum"]
    assert all("/" not in name for name in example_choices)  # names of an allowlist, not paths


@pytest.mark.parametrize("example", [str(PASSWD), "../models/video", str(REPO / "models" / "video")])
def test_example_and_drafter_choices_are_an_allowlist(client, example):
    with pytest.raises(AppError, match="is not in the list of choices"):
        client.predict(example=example, **FAST, api_name="/video")
    with pytest.raises(AppError, match="is not in the list of choices"):
        client.predict(drafter=example, **FAST, api_name="/video")


# ----------------------------------------------------------------------- (d) upload size


def test_raw_upload_over_the_limit_is_refused(server):
    """The upload route itself refuses (HTTP 413), before any endpoint runs (test server: 1 MB)."""
    boundary = "specvideo-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.mp4"\r\n'
            "Content-Type: video/mp4\r\n\r\n"
        ).encode()
        + b"\0" * (2 * 1024 * 1024)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{server}gradio_api/upload",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=60)
    assert info.value.code == 413
    assert "exceeded maximum allowed size of 1048576 bytes" in info.value.read().decode()


# -------------------------------------------------------------------- (e) temporary files


def test_request_folders_stay_bounded(client):
    for _ in range(SCRATCH_KEEP + 2):
        client.predict(**FAST, api_name="/video")
    folders = list(scratch_root().glob("req-*"))
    assert 1 <= len(folders) <= SCRATCH_KEEP


def test_gradio_cache_is_deleted_by_age(tiny_models, monkeypatch):
    """A server with cache_max_age_s=1 deletes a request's uploads and outputs within seconds."""
    monkeypatch.setenv("SPECVIDEO_MODELS", str(tiny_models))
    config = replace(APP_DEFAULTS, port=free_port(), cache_max_age_s=1)
    demo = build_demo(config)
    assert demo.delete_cache == (1, 1)
    _, url, _ = launch(demo, config, prevent_thread_lock=True, quiet=True)
    try:
        # download_files=False: under load the 1 s max age can delete the output before a download
        Client(url, verbose=False, download_files=False).predict(**FAST, api_name="/video")
        cached = {Path(f) for files in demo.temp_file_sets for f in files}
        assert any(f.name == "generated.mp4" for f in cached)
        deadline = time.monotonic() + 30
        while any(f.exists() for f in cached) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not any(f.exists() for f in cached)
    finally:
        demo.close()
