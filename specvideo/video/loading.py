"""Loading a saved video pipeline's parts: each part read with one clear error naming its file
(``load_part``), the scheduler by its saved class, the drafter by its saved name or weights, and the
autocast dtype the UNet runs under (``resolve_autocast``)."""

from __future__ import annotations

import json
from pathlib import Path

import diffusers
import torch

from specvideo.device import native_bf16
from specvideo.errors import first_line
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.flownets import FLOW_NETS

AUTOCAST = ("off", "bf16", "auto")


def resolve_autocast(value: str | torch.dtype | None, device: torch.device | str = "cpu") -> torch.dtype | None:
    """The dtype the verifier's UNet runs under autocast: "bf16" (or torch.bfloat16) bf16, "auto"
    bf16 where ``device`` computes it natively (a CPU's bf16 units, ``specvideo.device``),
    "off" / None none."""
    if value is None or value == "off":
        return None
    if value in ("bf16", torch.bfloat16):
        return torch.bfloat16
    if value == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    raise ValueError(f"autocast must be one of {', '.join(AUTOCAST)}, got {value!r}")


def load_part(path: Path, load):
    """``load(path)``; any failure becomes one ValueError naming the file or directory."""
    if not path.exists():
        raise ValueError(f"cannot load {path}: it does not exist")
    try:
        return load(path)
    except Exception as err:
        raise ValueError(f"cannot load {path}: {first_line(err)}") from err


def read_json(path: Path) -> dict:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def load_scheduler(path: Path):
    config = read_json(path / "scheduler_config.json")
    name = config.get("_class_name")
    if not isinstance(name, str) or not hasattr(diffusers, name):
        raise ValueError(f"unknown scheduler class {name!r} in scheduler_config.json")
    return getattr(diffusers, name).from_config(config)


def load_drafter(path: Path, drafter: str | FrameDrafter | None) -> FrameDrafter:
    if isinstance(drafter, FrameDrafter):
        return drafter
    saved = path / "drafter.json"
    name = drafter or (load_part(saved, read_json).get("name") if saved.is_file() else D.drafter)
    if name == "learned":
        if not (path / "config.json").is_file():
            raise ValueError(f"drafter 'learned' needs trained weights in {path}")
        return load_part(path, lambda p: LearnedDrafter.from_pretrained(p, local_files_only=True))
    return make_drafter(name)


def drafter_name_of(drafter: FrameDrafter) -> str:
    names = {
        "CopyLastDrafter": "copy",
        "LinearDrafter": "linear",
        "FlowDrafter": "flow",
        "LearnedDrafter": "learned",
    }
    name = names.get(type(drafter).__name__, type(drafter).__name__)
    if name == "flow" and drafter.config.flow_model in FLOW_NETS:
        return f"flow:{drafter.config.flow_model}"
    return name
