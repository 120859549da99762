"""The workers: each loads its models once and turns a chunk of items into manifest rows. The same
class runs in this process (local mode) and as a Ray actor (one per GPU, or per few CPUs).

A chunk goes through the pipeline's batch support in one call; if that call fails (a prompt too
long, an unreadable video), its items are redone one by one so that only the bad item fails.
"""

from __future__ import annotations

import time
from typing import Any

from specvideo.batch.items import VIDEO_SETTINGS, TextItem, VideoItem, side_by_side_path
from specvideo.errors import first_line
from specvideo.video.config import VIDEO_DEFAULTS


def _error(item_id: str, reason: Exception | str, **extra) -> dict[str, Any]:
    reason = first_line(reason) if isinstance(reason, Exception) else reason
    return {"id": item_id, "status": "error", "reason": reason, **extra}


class VideoWorker:
    """Continues videos with one SpeculativeVideoPipeline; ``settings`` are the job's
    (``specvideo.batch.video_settings``): the VideoConfig settings ``VIDEO_SETTINGS`` (seed: every
    item's generator seed), "max_side" (the longer side inputs are downscaled to on decode), "fps"
    and "side_by_side". Items of one frame size share a pipe batch."""

    def __init__(
        self, model: str | None, drafter: str | None, device: str | None, threads: int | None = None
    ):
        import torch

        from specvideo.video.pipeline import SpeculativeVideoPipeline

        if threads:
            torch.set_num_threads(threads)
        self.pipe = SpeculativeVideoPipeline.from_pretrained(model, drafter=drafter, device=device)

    def process(self, items: list[VideoItem], settings: dict[str, Any]) -> list[dict[str, Any]]:
        loaded, rows = [], {}
        for item in items:
            try:
                loaded.append((item, self._context(item, settings["max_side"])))
            except Exception as err:  # noqa: BLE001 - one bad input fails its own item only
                rows[item.id] = _error(item.id, err, input=item.path)
        for size in dict.fromkeys(clip.size for _, clip in loaded):  # one pipe batch per frame size
            group = [(item, clip) for item, clip in loaded if clip.size == size]
            try:
                rows.update(self._generate(group, settings))
            except Exception:  # noqa: BLE001 - isolate the item that broke the batch
                for item, context in group:
                    try:
                        rows.update(self._generate([(item, context)], settings))
                    except Exception as err:  # noqa: BLE001
                        rows[item.id] = _error(item.id, err, input=item.path)
        return [rows[item.id] for item in items]

    def _context(self, item: VideoItem, max_side: int):
        from specvideo.video.io import read_context

        P = self.pipe.verifier.num_context_frames  # P + 1 when there: the check's reference frame
        return read_context(item.path, P + 1, max_side, minimum=P)

    def _generate(self, loaded, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
        import torch

        from specvideo.video.io import short_warning, write_video
        from specvideo.video.sidebyside import side_by_side_frames

        start = time.perf_counter()
        config = VIDEO_DEFAULTS.updated(**{k: settings[k] for k in VIDEO_SETTINGS})
        generators = [torch.Generator().manual_seed(config.seed) for _ in loaded]
        out = self.pipe([clip.frames for _, clip in loaded], config, generator=generators, progress=False)
        seconds = (time.perf_counter() - start) / len(loaded)  # the batch's time, shared out
        rows = {}
        for b, (item, clip) in enumerate(loaded):
            fps = settings.get("fps") or clip.fps
            write_video(out.frames[b], item.output, fps=fps)
            row = {"id": item.id, "input": item.path, "output": item.output, "status": "ok"}
            if warning := short_warning(item.path, clip):
                row["warning"] = warning
            if settings.get("side_by_side"):
                sbs = side_by_side_path(item.output)
                stats = out.row_stats[b]
                write_video(
                    side_by_side_frames(clip.frames[-1], out.frames[b], out.drafts[b], stats.frame_accepted),
                    sbs,
                    fps=fps,
                )
                row["side_by_side"] = sbs
            rows[item.id] = {**row, "stats": _video_stats(out.row_stats[b]), "wall_s": seconds}
        return rows


def _video_stats(stats) -> dict[str, Any]:
    keep = ("drafted", "accepted", "emitted", "target_calls", "target_only_calls", "unet_passes", "rounds")
    return {"acceptance_rate": stats.acceptance_rate, **{k: getattr(stats, k) for k in keep}}


class TextWorker:
    """Generates replies with one SpeculativeGenerator. Items of one setting share a batch (unless
    the drafter verifies one row at a time: its spec's ``one_row``), each row decoded with its own
    item's seed (``RowSampler``), so every output is the same however the items are split among
    workers and batches."""

    def __init__(
        self,
        target: str | None,
        draft: str | None,
        config,
        loading: dict,
        device: str | None,
        threads: int | None = None,
    ):
        """config: the job's TextConfig; loading: from_pretrained's dtype / exact."""
        import torch

        from specvideo.text import SpeculativeGenerator

        if threads:
            torch.set_num_threads(threads)
        self.gen = SpeculativeGenerator.from_pretrained(target, draft, device=device, config=config, **loading)

    def process(self, items: list[TextItem], settings: dict[str, Any]) -> list[dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        groups: dict[str, list[tuple[TextItem, dict]]] = {}
        for item in items:
            if item.error:
                rows[item.id] = _error(item.id, item.error, line=item.line)
                continue
            merged = {**settings, **item.settings}
            alone = self.gen.drafter_spec.one_row  # token trees: one row a call
            key = item.id if alone else repr(sorted((k, v) for k, v in merged.items() if k != "seed"))
            groups.setdefault(key, []).append((item, merged))
        for group in groups.values():
            rows.update(self._group(group))
        return [rows[item.id] for item in items]

    def _group(self, group: list[tuple[TextItem, dict]]) -> dict[str, dict[str, Any]]:
        try:
            return self._generate(group)
        except Exception:  # noqa: BLE001 - isolate the item that broke the batch
            rows = {}
            for one in group:
                try:
                    rows.update(self._generate([one]))
                except Exception as err:  # noqa: BLE001
                    rows[one[0].id] = _error(one[0].id, err, line=one[0].line, input=one[0].prompt)
            return rows

    def _generate(self, group: list[tuple[TextItem, dict]]) -> dict[str, dict[str, Any]]:
        settings = dict(group[0][1])
        settings.pop("seed", None)
        seeds = [merged.get("seed", 0) for _, merged in group]
        prompts = [self._prompt(item) for item, _ in group]
        start = time.perf_counter()
        out = self.gen.generate(prompts, seed=seeds, **settings)
        seconds = (time.perf_counter() - start) / len(group)
        stats = asdict_stats(out.stats, len(group))
        return {
            item.id: {
                "id": item.id,
                "line": item.line,
                "input": item.prompt,
                "status": "ok",
                "text": out.text[b] if isinstance(out.text, list) else out.text,
                "new_tokens": len(out.token_ids[b]),
                "stats": stats,
                "wall_s": seconds,
            }
            for b, (item, _) in enumerate(group)
        }

    def _prompt(self, item: TextItem) -> str:
        if isinstance(item.prompt, str):
            return item.prompt
        tokenizer = self.gen.tokenizer
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat messages need a target whose tokenizer has a chat template")
        return tokenizer.apply_chat_template(item.prompt, add_generation_prompt=True, tokenize=False)


def asdict_stats(stats, rows: int) -> dict[str, Any]:
    """The batch call's counters (shared by its rows), as JSON."""
    keep = ("drafted", "accepted", "emitted", "target_calls", "draft_calls", "rounds")
    return {
        "acceptance_rate": stats.acceptance_rate,
        "batch_rows": rows,
        **{k: getattr(stats, k) for k in keep},
    }


__all__ = ["TextWorker", "VideoWorker"]
