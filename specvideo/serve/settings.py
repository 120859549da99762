"""What ``specvideo serve`` loads and how it serves, in one place for the single server
(``specvideo.cli.serve``) and each Ray Serve replica (``specvideo.serve.replicas``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeSettings:
    model: str = "smollm2"
    name: str | None = None  # the model id clients ask for (default: the model's name)
    draft: str | None = None
    drafter: str | None = None  # None: the model's default drafter
    dtype: str = "auto"
    device: str | None = None
    packed: str = "auto"  # auto / on / off
    exact: bool = False
    max_queue: int = 16
    max_batch: int = 4
    max_tokens: int = 2048
    prompt_cache_mb: int = 512
    api_key: str | None = None
    threads: int = 1  # torch threads of a replica (and the CPUs Ray reserves for it)

    @property
    def served_name(self) -> str:
        from specvideo.text.models.names import model_name

        return self.name or model_name(self.model)


def load_generator(settings: ServeSettings):
    """The SpeculativeGenerator the server runs (it needs the model's tokenizer)."""
    from specvideo.text import SpeculativeGenerator
    from specvideo.text.config import TEXT_DEFAULTS

    gen = SpeculativeGenerator.from_pretrained(
        settings.model,
        settings.draft,
        device=settings.device,
        packed={"auto": "auto", "on": True, "off": False}[settings.packed],
        dtype=settings.dtype,
        exact=settings.exact,
        config=TEXT_DEFAULTS.updated(drafter=settings.drafter),
    )
    if gen.tokenizer is None:
        raise ValueError(f"no tokenizer found for model {settings.model}: the server needs one")
    return gen
