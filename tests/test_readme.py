"""The README's Python snippets run as written (those that need no server and no placeholder path),
and every relative link in it resolves inside the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
NEEDS_OUTSIDE = ("Client(", "OpenAI(", "path/to/", "input.mp4")  # a running server, a file the reader brings


def runnable() -> list[str]:
    return [s for s in SNIPPETS if not any(marker in s for marker in NEEDS_OUTSIDE)]


def test_the_readme_has_runnable_snippets_for_both_sides():
    sources = "".join(runnable())
    assert "SpeculativeGenerator" in sources and "SpeculativeVideoPipeline" in sources


@pytest.mark.parametrize("index", range(len(runnable())))
def test_readme_snippet_runs(index, monkeypatch, capsys):
    monkeypatch.delenv("SPECVIDEO_MODELS", raising=False)  # the shipped models, as a new user has them
    exec(compile(runnable()[index], f"README snippet {index}", "exec"), {})
    assert capsys.readouterr().out  # every snippet prints what it made


def test_readme_links_resolve_inside_the_repository():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links its docs"
    for link in local:
        target = (ROOT / link.split("#")[0]).resolve()
        assert target.is_relative_to(ROOT) and target.exists(), link
    assert "../" not in README


def test_the_readme_is_a_short_guide_without_history():
    assert len(README.splitlines()) <= 250, "long explanations belong in docs/GUIDE.md"
    assert not re.search(r"(?<![\w#&])#\d+\b", README), "issue numbers and history belong in docs/"
    assert "docs/GUIDE.md" in README
