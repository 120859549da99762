"""The manifest: one JSON line per item (input, settings, stats, wall time, status and reason).

Lines are appended (and flushed) as items finish, so a killed job keeps what it did; at the end of a
run the file is rewritten through a temporary file and a rename, keeping the newest line per item.
A rerun skips an item whose line says "ok" with the same settings and whose output still exists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from specvideo.files import atomic_write


class Manifest:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed job: that item is simply redone
                if isinstance(row, dict) and "id" in row:
                    self.rows[row["id"]] = row

    def done(self, item_id: str, settings_hash: str, output: str | None = None) -> dict | None:
        """The item's row if it finished ok with these settings (and its output file exists)."""
        row = self.rows.get(item_id)
        if row is None or row.get("status") != "ok" or row.get("settings_hash") != settings_hash:
            return None
        if output is not None and not Path(output).is_file():
            return None
        return row

    def append(self, row: dict[str, Any]) -> None:
        self.rows[row["id"]] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def compact(self, order: list[str]) -> None:
        """Rewrite with one line per item: those of ``order`` first, in that order, then the rest."""
        ids = [i for i in order if i in self.rows] + [i for i in self.rows if i not in set(order)]
        text = "".join(json.dumps(self.rows[i]) + "\n" for i in ids)
        atomic_write(self.path, lambda f: f.write(text))
