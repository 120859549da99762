"""What a video benchmark run returns: its rows, clips, settings, machine and checks. Its own module
so that the run, the report and the plot each import it without importing one another."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.video.generative import GenerativeScore
from benchmarks.video.injected import InjectedCheck
from benchmarks.video.local import LocalCheck
from benchmarks.video.methods import RuntimeEstimate
from benchmarks.video.scoring import VideoMethodResult


@dataclass
class BenchVideoResults:
    rows: list[VideoMethodResult]
    clips: dict[str, list[str]]  # workload -> clip names
    settings: dict[str, Any]
    machine: dict[str, Any]
    estimate: RuntimeEstimate
    notes: list[str] = field(default_factory=list)
    local_checks: list[LocalCheck] = field(default_factory=list)  # the check on true-context rounds
    # the generative measures (benchmarks.video.generative) per (workload, method)
    generative: dict[tuple[str, str], GenerativeScore] = field(default_factory=dict)
    # per workload: (Spearman, drafts, rows) of the check pooled over the drafters at the default setting
    pooled_check: dict[str, tuple] = field(default_factory=dict)
    injected: list[InjectedCheck] = field(default_factory=list)  # known-bad drafts against the check

    @property
    def workloads(self) -> list[str]:
        return list(self.clips)

    def row(self, workload: str, method: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.method == method), None)

    def reference(self, workload: str) -> VideoMethodResult | None:
        return next(
            (
                r
                for r in self.rows
                if r.workload == workload and r.family == "target" and r.steps == r.reference_steps
            ),
            None,
        )

    def default_row(self, workload: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.is_default), None)

    def to_dict(self, targets: list | None = None) -> dict[str, Any]:
        """Everything as JSON-ready data; ``targets``: the report's target checks, to include."""
        return {
            "settings": self.settings,
            "machine": self.machine,
            "estimate": asdict(self.estimate),
            "notes": self.notes,
            "clips": self.clips,
            "rows": [asdict(r) for r in self.rows],
            "local_checks": [asdict(c) for c in self.local_checks],
            "generative": [
                {"workload": w, "method": m, **asdict(score)} for (w, m), score in self.generative.items()
            ],
            "pooled_check": self.pooled_check,
            "injected": [asdict(c) for c in self.injected],
            "targets": [asdict(c) for c in targets or []],
        }
