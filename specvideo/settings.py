"""What the two settings dataclasses (``TextConfig``, ``VideoConfig``) share: a checked copy."""

from __future__ import annotations

from dataclasses import fields, replace


class Settings:
    """A frozen dataclass of settings; ``KIND`` names its side in messages."""

    KIND = "a"

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def updated(self, **changes):
        """A copy with ``changes``; an unknown name is a ValueError naming it."""
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise ValueError(f"unknown {self.KIND} setting(s) {unknown}; choose from {list(self.names())}")
        return replace(self, **changes) if changes else self
