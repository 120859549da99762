"""What every benchmark report shares: machine information and safe edits of the reports (docs/history/benchmarks.md by default).

Each benchmark owns one "## ..." section of the report; ``replace_section`` swaps that section and
leaves the others as they are, ``atomic_write`` never leaves a half-written file behind.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import torch

from specvideo.files import atomic_write  # noqa: F401 (the reports write through it)


def print_results(payload: dict, markdown: str, targets: str, command: str, written, as_json: bool) -> int:
    """What ``specvideo bench KIND`` prints: one JSON object (``--json``), or the results table and
    the targets, and where the report went; returns the exit code."""
    if as_json:
        print(json.dumps({**payload, "command": command, "report": written and str(written)}))
        return 0
    print(markdown)
    print("Targets:")
    print(targets)
    if written is not None:
        print(f"\nreport written to {written}", file=sys.stderr)
    return 0


def machine_info(
    device: torch.device | str = "cpu", packages: Sequence[str] = ("transformers",)
) -> dict[str, Any]:
    """Processor, cores, threads, versions (Python, torch and each of ``packages``), device, load."""
    device = torch.device(device)
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "platform": platform.platform(),
        "processor": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        **{name: _version(name) for name in packages},
        "device": str(device),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fmt_load(load) -> str:
    return "n/a" if not load else " / ".join(f"{x:.2f}" for x in load)


def command_block(heading: str, command: str) -> list[str]:
    """A report section's opening lines: its heading and the command that produced it."""
    return [heading, "", "Command:", "", "```bash", command, "```", ""]


def replace_section(document: str, heading: str, section: str) -> str:
    """Replace the ``heading`` section (up to the next heading of the same level) or append it."""
    lines = document.splitlines()
    level = heading.split(" ")[0]
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        return document.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(level + " ")),
        len(lines),
    )
    before = "\n".join(lines[:start]).rstrip("\n")
    after = "\n".join(lines[end:])
    out = (before + "\n\n" if before else "") + section.rstrip("\n") + "\n"
    return out + ("\n" + after.rstrip("\n") + "\n" if after else "")


def write_section(path, heading: str, command: str, body: list[str]) -> None:
    """Replace (or append) the ``heading`` section of the markdown report at ``path``: its command,
    the machine it ran on, then ``body``'s lines; written temp-then-rename."""
    from pathlib import Path

    info = machine_info(packages=())
    machine = f"Machine: {info['processor']}, {info['torch_threads']} threads, {info['date_utc']} UTC."
    section = "\n".join(command_block(heading, command) + [machine, "", *body])
    path = Path(path)
    document = replace_section(path.read_text() if path.exists() else "", heading, section)
    atomic_write(path, lambda f: f.write(document))
