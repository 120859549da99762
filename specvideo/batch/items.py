"""What a batch job works on: video files found from paths, folders and globs, or the lines of a
prompts file; each item with a stable id, and settings with a hash that tells a rerun whether an
item's output is still current."""

from __future__ import annotations

import glob
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specvideo.video.config import CALL_SETTINGS

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".gif")
TEXT_LINE_SETTINGS = ("max_new_tokens", "temperature", "top_k", "top_p", "seed")


# the VideoConfig settings a job's items share: the pipeline call's (the check's levels and fold
# kept at their defaults) and every item's generator seed
VIDEO_SETTINGS = (*(n for n in CALL_SETTINGS if n not in ("check_levels", "check_center")), "seed")


def settings_hash(settings: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class VideoItem:
    id: str  # the input's absolute path
    path: str
    output: str  # the MP4 this item writes


def find_videos(inputs: list[str]) -> list[str]:
    """Files, folders (their video files, sorted, not recursive) and glob patterns -> absolute paths,
    in the order given, each once. A name that matches nothing is kept: its item fails on its own."""
    found: list[str] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_dir():
            found += sorted(
                str(p) for p in path.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file()
            )
        elif any(c in raw for c in "*?[") and not path.exists():
            found += sorted(glob.glob(raw))
        else:
            found.append(raw)
    return list(dict.fromkeys(os.path.abspath(p) for p in found))


def video_items(inputs: list[str], out_dir: str) -> list[VideoItem]:
    """One item per video; outputs named after the input's stem (``-2``, ``-3``, ... for repeats)."""
    items, taken = [], {}
    for path in find_videos(inputs):
        stem = Path(path).stem
        taken[stem] = taken.get(stem, 0) + 1
        name = stem if taken[stem] == 1 else f"{stem}-{taken[stem]}"
        items.append(VideoItem(path, path, str(Path(out_dir) / f"{name}.mp4")))
    return items


def side_by_side_path(output: str) -> str:
    """Where a video item's side-by-side MP4 goes, beside its output."""
    return str(Path(output).with_suffix("")) + ".sbs.mp4"


@dataclass(frozen=True)
class TextItem:
    id: str  # line number and a hash of the line: editing a line makes it a new item
    line: int
    prompt: str | list[dict] | None  # a str, or chat messages [{"role", "content"}, ...]
    settings: dict[str, Any] = field(default_factory=dict)  # this line's own settings
    error: str | None = None  # the line could not be read: its item fails with this reason


def text_items(path: str) -> list[TextItem]:
    """One item per non-empty line of a JSONL file: {"prompt": str} or {"messages": [...]}, plus
    optional per-line settings (max_new_tokens, temperature, top_k, top_p, seed)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read prompts file {path}: {err}") from err
    items = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            items.append(_text_item(number, line))
    if not items:
        raise ValueError(f"prompts file {path} has no prompts")
    return items


def _text_item(number: int, line: str) -> TextItem:
    item_id = f"{number}:{hashlib.sha1(line.encode()).hexdigest()[:10]}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        return TextItem(item_id, number, None, error=f"line {number} is not JSON: {err.msg}")
    if not isinstance(data, dict):
        return TextItem(item_id, number, None, error=f"line {number} must be a JSON object")
    prompt = data.get("messages", data.get("prompt"))
    problem = _prompt_problem(prompt)
    unknown = sorted(set(data) - {"prompt", "messages", "id", *TEXT_LINE_SETTINGS})
    if unknown:
        problem = (
            problem or f"unknown key(s) {unknown}; a line has prompt or messages and {TEXT_LINE_SETTINGS}"
        )
    settings = {k: data[k] for k in TEXT_LINE_SETTINGS if k in data}
    return TextItem(item_id, number, prompt, settings, f"line {number}: {problem}" if problem else None)


def _prompt_problem(prompt) -> str | None:
    if isinstance(prompt, str):
        return None if prompt else "the prompt is empty"
    if isinstance(prompt, list) and prompt:
        ok = all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in prompt
        )
        return None if ok else 'messages must be a list of {"role": str, "content": str}'
    return 'needs "prompt" (a string) or "messages" (a list of {"role", "content"})'
