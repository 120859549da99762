"""The prompts of a workload: code and chat (``prompts``), fill in the middle (``fim``)."""

from __future__ import annotations

from benchmarks.text.fim import fim_prompts
from benchmarks.text.prompts import BenchPrompt, chat_prompts, code_prompts


def workload_prompts(workload: str, split: str, n: int = 0) -> list[BenchPrompt]:
    if workload == "code":
        return code_prompts(split, n)
    if workload == "chat":
        return chat_prompts(split, n)
    if workload == "fim":
        return fim_prompts(split, n)
    raise ValueError(f"unknown workload {workload!r}; choose code, fim or chat")
