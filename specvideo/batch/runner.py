"""Running a batch job: skip what is done, cut the rest into chunks, process them in this process or
on Ray actors, record every item in the manifest as it finishes, and summarise.

Local (``ray=None``): one worker in this process, chunk after chunk. Ray (``ray="local"``: a private
instance for this job; ``"auto"`` or an address: an existing cluster): an ``ActorPool`` of workers,
each holding the models once, with one GPU each when the cluster has GPUs, else ``cpus_per_actor``
CPUs. Ray schedules the chunks, restarts a killed actor and retries its chunk (``max_restarts``,
``max_task_retries``); back-pressure is the pool's: a chunk waits until an actor is free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specvideo.batch.manifest import Manifest

RAY_INSTALL = 'ray is not installed: pip install -e ".[ray]" (or pip install "ray>=2.40")'
RETRIES = 3


@dataclass
class BatchContext:
    """Handed to ``on_item`` after every finished item: the Ray actors (empty locally) and counts."""

    actors: list = field(default_factory=list)
    done: int = 0
    total: int = 0


@dataclass
class BatchSummary:
    items: int
    ok: int
    errors: int
    skipped: int
    seconds: float
    acceptance_rate: float | None

    @property
    def items_per_s(self) -> float:
        processed = self.items - self.skipped
        return processed / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        acceptance = "-" if self.acceptance_rate is None else f"{self.acceptance_rate:.3f}"
        return (
            f"{self.items} items: {self.ok} ok, {self.errors} failed, {self.skipped} skipped (already done); "
            f"{self.seconds:.1f} s, {self.items_per_s:.2f} items/s, acceptance {acceptance}"
        )


@dataclass
class Job:
    """What the runner needs from a video or text job."""

    worker_cls: type
    worker_args: tuple
    items: list  # every item of the job, in input order
    settings: dict[str, Any]  # the job-wide settings every worker call gets
    item_hash: Callable[[Any], str]  # an item's settings hash (job-wide and per-item settings)
    output_of: Callable[[Any], str | None]  # the file an ok item must have written
    manifest: Manifest
    chunk_size: int
    desc: str


def run_job(
    job: Job,
    ray: str | None = None,
    num_actors: int | None = None,
    cpus_per_actor: int = 1,
    force: bool = False,
    progress: bool = True,
    on_item: Callable[[dict, BatchContext], None] | None = None,
) -> tuple[list[dict], BatchSummary]:
    """Process every item not already done; returns the manifest rows in input order and a summary."""
    start = time.perf_counter()
    todo, skipped = [], 0
    for item in job.items:
        if not force and job.manifest.done(item.id, job.item_hash(item), job.output_of(item)):
            skipped += 1
        else:
            todo.append(item)
    chunks = [todo[i : i + job.chunk_size] for i in range(0, len(todo), job.chunk_size)]
    tracker = _Tracker(job, len(job.items), skipped, progress, on_item)
    if chunks:
        if ray is None:
            worker = job.worker_cls(*job.worker_args)
            for chunk in chunks:
                tracker.record(chunk, worker.process(chunk, job.settings))
        else:
            _run_on_ray(job, chunks, tracker, ray, num_actors, cpus_per_actor)
    tracker.close()
    job.manifest.compact([item.id for item in job.items])
    rows = [job.manifest.rows[item.id] for item in job.items if item.id in job.manifest.rows]
    summary = BatchSummary(
        items=len(job.items),
        ok=sum(r.get("status") == "ok" for r in rows),
        errors=sum(r.get("status") != "ok" for r in rows),
        skipped=skipped,
        seconds=time.perf_counter() - start,
        acceptance_rate=tracker.acceptance,
    )
    return rows, summary


class _Tracker:
    """Writes each finished item's manifest line and keeps the progress bar's running figures."""

    def __init__(self, job: Job, total: int, skipped: int, progress: bool, on_item):
        from tqdm.auto import tqdm

        self.job, self.on_item = job, on_item
        self.context = BatchContext(total=total, done=skipped)
        self.drafted = self.accepted = 0
        self.started = time.perf_counter()
        self.bar = tqdm(total=total, initial=skipped, desc=job.desc, unit="item", disable=not progress)

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    def record(self, chunk: list, rows: list[dict]) -> None:
        for item, row in zip(chunk, rows, strict=True):
            row = {**row, "settings": {**self.job.settings, **getattr(item, "settings", {})}}
            row["settings_hash"] = self.job.item_hash(item)
            self.job.manifest.append(row)
            stats = row.get("stats") or {}
            share = max(1, stats.get("batch_rows", 1))  # a text batch's counters are shared by its rows
            self.drafted += stats.get("drafted", 0) / share
            self.accepted += stats.get("accepted", 0) / share
            self.context.done += 1
            self.bar.update(1)
            rate = self.context.done / max(time.perf_counter() - self.started, 1e-9)
            acc = "-" if self.acceptance is None else f"{self.acceptance:.2f}"
            self.bar.set_postfix_str(f"acceptance {acc}, {rate:.2f} items/s", refresh=False)
            if self.on_item is not None:
                self.on_item(row, self.context)

    def close(self) -> None:
        self.bar.close()


def _run_on_ray(
    job: Job, chunks: list[list], tracker: _Tracker, address: str, num_actors, cpus_per_actor: int
):
    try:
        import ray
        from ray.util import ActorPool
    except ImportError:
        raise ValueError(RAY_INSTALL) from None
    started = _connect(ray, address, cpus_per_actor, num_actors)
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        cpus = int(ray.cluster_resources().get("CPU", 1))
        per_actor = {"num_gpus": 1} if gpus else {"num_cpus": cpus_per_actor}
        n = num_actors or (gpus if gpus else max(1, cpus // cpus_per_actor))
        n = max(1, min(n, len(chunks)))
        remote = ray.remote(max_restarts=RETRIES, max_task_retries=RETRIES)(job.worker_cls).options(
            **per_actor
        )
        args = _device_args(job.worker_args, "cuda" if gpus else None, None if gpus else cpus_per_actor)
        actors = [remote.remote(*args) for _ in range(n)]
        tracker.context.actors = actors
        pool = ActorPool(actors)
        chunk_of = {chunk[0].id: chunk for chunk in chunks}
        for chunk in chunks:
            pool.submit(lambda actor, c: actor.process.remote(c, job.settings), chunk)
        while pool.has_next():
            rows = pool.get_next_unordered()  # whichever chunk finishes first
            tracker.record(chunk_of[rows[0]["id"]], rows)
    finally:
        if started:
            ray.shutdown()


def _connect(ray, address: str, cpus_per_actor: int, num_actors: int | None) -> bool:
    """Join or start Ray; True when this job started a private instance it must shut down."""
    if ray.is_initialized():
        return False
    if address == "local":
        cpus = max(os.cpu_count() or 1, (num_actors or 1) * cpus_per_actor)
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        return True
    ray.init(address=address, log_to_driver=False, configure_logging=False)
    return False


def _device_args(worker_args: tuple, device: str | None, threads: int | None) -> tuple:
    """The worker's args with its device (cuda when it holds a GPU) and torch thread count set."""
    *rest, old_device, _ = worker_args
    return (*rest, device or old_device, threads)
