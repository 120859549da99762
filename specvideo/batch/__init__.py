"""Batch jobs: many videos or many prompts, in this process or fanned out over a Ray cluster.

``run_video(inputs, out_dir, ray=None, **settings)`` continues every video of ``inputs`` (files,
folders or globs) into ``out_dir`` with a manifest.jsonl; ``run_text(prompts_jsonl, out_jsonl,
ray=None, **settings)`` answers every line of a prompts file into a results file that is its
manifest. Both return the manifest rows in input order, skip items done before with the same
settings (``force=True`` redoes them), and fail a bad item alone.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from specvideo.batch.items import (
    TEXT_LINE_SETTINGS,
    VIDEO_SETTINGS,
    TextItem,
    VideoItem,
    settings_hash,
    side_by_side_path,
    text_items,
    video_items,
)
from specvideo.batch.manifest import Manifest
from specvideo.batch.runner import BatchContext, BatchSummary, Job, run_job
from specvideo.batch.workers import TextWorker, VideoWorker
from specvideo.files import clashing_outputs
from specvideo.video.config import VIDEO_DEFAULTS, VideoConfig

VIDEO_JOB_SETTINGS = ("fps", "side_by_side", "max_side")  # the job's own, beside the pipeline's
TEXT_LOADING = ("dtype", "exact")  # how from_pretrained loads the models, beside the TextConfig


def video_settings(config: VideoConfig | None = None, **given) -> dict[str, Any]:
    """The job's settings: ``config`` (default VIDEO_DEFAULTS) with ``given`` over it, checked as
    the pipeline would check them, the threshold resolved to the metric's own when None."""
    from specvideo.video.inputs import check_settings

    unknown = sorted(set(given) - set(VIDEO_SETTINGS) - set(VIDEO_JOB_SETTINGS))
    if unknown:
        raise ValueError(f"unknown video setting(s) {unknown}; choose from {VIDEO_SETTINGS + VIDEO_JOB_SETTINGS}")
    job = {"fps": given.pop("fps", None), "side_by_side": given.pop("side_by_side", False)}
    config = (config or VIDEO_DEFAULTS).updated(**given)
    if not isinstance(config.max_side, int) or isinstance(config.max_side, bool) or config.max_side < 8:
        raise ValueError(f"max_side must be an integer >= 8 (pixels), got {config.max_side!r}")
    check_settings(config)
    return {**{k: getattr(config, k) for k in VIDEO_SETTINGS}, "threshold": config.tau, "max_side": config.max_side, **job}


def run_video(
    inputs: list[str] | str, out_dir: str, ray: str | None = None, **kwargs
) -> list[dict[str, Any]]:
    """Continue every video in ``inputs`` (files, folders, globs) into ``out_dir`` (MP4s and
    ``manifest.jsonl``); keyword arguments as ``video_job``. Returns the manifest rows in input order."""
    return video_job(inputs, out_dir, ray, **kwargs)[0]


def video_job(
    inputs,
    out_dir,
    ray=None,
    *,
    model=None,
    drafter=None,
    device=None,
    batch_size=4,
    num_actors=None,
    cpus_per_actor=1,
    force=False,
    progress=True,
    on_item=None,
    config=None,
    **settings,
):
    """The video job: model / drafter / device choose the pipeline; batch_size items go through one
    pipeline call; ray, num_actors, cpus_per_actor choose where (see specvideo.batch.runner); force
    redoes finished items; on_item(row, context) is called after every item; config: the
    VideoConfig of every item (default VIDEO_DEFAULTS), the other keyword arguments settings over it
    (VIDEO_SETTINGS, max_side) and the job's own (fps, side_by_side). Returns (rows, BatchSummary)."""
    _check_batch(batch_size, cpus_per_actor, num_actors)
    settings = video_settings(config, **settings)
    out = Path(out_dir)
    items = video_items([inputs] if isinstance(inputs, str) else list(inputs), str(out))
    if not items:
        raise ValueError(f"no video files found in {inputs}")
    _refuse_clashes(items, out, settings["side_by_side"])
    out.mkdir(parents=True, exist_ok=True)
    identity = {"model": str(model), "drafter": drafter, **settings}
    job = Job(
        worker_cls=VideoWorker,
        worker_args=(model, drafter, device, None),
        items=items,
        settings=settings,
        item_hash=lambda item: settings_hash(identity),
        output_of=lambda item: item.output,
        manifest=Manifest(out / "manifest.jsonl"),
        chunk_size=batch_size,
        desc="batch video",
    )
    return run_job(job, ray, num_actors, cpus_per_actor, force, progress, on_item)


def run_text(prompts: str, out: str, ray: str | None = None, **kwargs) -> list[dict[str, Any]]:
    """Answer every line of the JSONL ``prompts`` into the JSONL ``out`` (one manifest row a line);
    keyword arguments as ``text_job``. Returns the rows in input order."""
    return text_job(prompts, out, ray, **kwargs)[0]


def text_job(
    prompts,
    out,
    ray=None,
    *,
    target=None,
    draft=None,
    device=None,
    batch_size=8,
    num_actors=None,
    cpus_per_actor=1,
    force=False,
    progress=True,
    on_item=None,
    config=None,
    **settings,
):
    """The text job: target / draft / device, the TextConfig ``config`` (default TEXT_DEFAULTS)
    with the keyword arguments that name its settings over it, and TEXT_LOADING (dtype, exact)
    choose the generator; the config's TEXT_LINE_SETTINGS are each line's defaults (a line's own
    settings win); the job arguments are as for ``video_job``. Returns (rows, BatchSummary)."""
    from specvideo.text.config import TEXT_DEFAULTS, TextConfig

    _check_batch(batch_size, cpus_per_actor, num_actors)
    unknown = sorted(set(settings) - set(TextConfig.names()) - set(TEXT_LOADING))
    if unknown:
        raise ValueError(f"unknown text setting(s) {unknown}; choose from {TextConfig.names() + TEXT_LOADING}")
    loading = {k: settings.pop(k) for k in TEXT_LOADING if settings.get(k) is not None}
    config = (config or TEXT_DEFAULTS).updated(**settings)
    call = {k: getattr(config, k) for k in TEXT_LINE_SETTINGS}
    if problem := clashing_outputs({"the results file": str(out)}, [str(prompts)]):
        raise ValueError(problem)
    items = text_items(prompts)
    identity = {"target": str(target), "draft": str(draft), **loading, **asdict(config)}
    job = Job(
        worker_cls=TextWorker,
        worker_args=(target, draft, config, loading, device, None),
        items=items,
        settings=call,
        item_hash=lambda item: settings_hash({**identity, **item.settings, "line": item.id}),
        output_of=lambda item: None,
        manifest=Manifest(out),
        chunk_size=batch_size,
        desc="batch text",
    )
    return run_job(job, ray, num_actors, cpus_per_actor, force, progress, on_item)


def _refuse_clashes(items: list[VideoItem], out: Path, side_by_side: bool) -> None:
    """No output of the job may be one of its inputs or another of its outputs (before any work)."""
    outputs = {"the manifest": str(out / "manifest.jsonl")}
    for item in items:
        outputs[f"the output of {item.path}"] = item.output
        if side_by_side:
            outputs[f"the side-by-side of {item.path}"] = side_by_side_path(item.output)
    if problem := clashing_outputs(outputs, [item.path for item in items]):
        raise ValueError(problem)


def _check_batch(batch_size, cpus_per_actor, num_actors) -> None:
    for name, value, low in (("batch_size", batch_size, 1), ("cpus_per_actor", cpus_per_actor, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if num_actors is not None and (not isinstance(num_actors, int) or num_actors < 1):
        raise ValueError(f"num_actors must be an integer >= 1, got {num_actors!r}")


__all__ = [
    "BatchContext",
    "BatchSummary",
    "Manifest",
    "TextItem",
    "TextWorker",
    "VideoItem",
    "VideoWorker",
    "run_text",
    "run_video",
    "text_job",
    "video_job",
]
