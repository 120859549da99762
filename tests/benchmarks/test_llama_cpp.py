"""llama.cpp as a bench peer: its flags per mode, and a clear refusal when its server is not built
(the default test run never builds or runs it)."""

import pytest

from benchmarks.text import BenchTextConfig
from benchmarks.text.llama_cpp import llama_server_binary, mode_args
from benchmarks.text.methods import gguf_files


def test_mode_flags():
    assert mode_args("plain", None, 3) == []
    assert mode_args("ngram", None, 4)[:2] == ["--spec-type", "ngram-simple"] and "4" in mode_args("ngram", None, 4)
    draft = mode_args("draft", "d.gguf", 3)
    assert draft[:2] == ["--spec-type", "draft-simple"] and "d.gguf" in draft and draft[-1] == "3"
    with pytest.raises(ValueError, match="draft mode needs a draft GGUF"):
        mode_args("draft", None, 3)
    with pytest.raises(ValueError, match="unknown llama.cpp mode 'fast'"):
        mode_args("fast", None, 3)


def test_missing_server_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="run scripts/build_llama_cpp.sh once"):
        llama_server_binary()


def test_config_checks_modes_and_needs_a_gguf_target():
    with pytest.raises(ValueError, match="unknown llama.cpp mode 'fast'"):
        BenchTextConfig(methods=("hf-target", "llama-cpp"), llama_cpp_modes=("fast",))
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        BenchTextConfig(llama_cpp_ks=(0,))
    with pytest.raises(ValueError, match="llama.cpp rows run the default target's or the code pair's GGUF"):
        gguf_files(BenchTextConfig(target="some/dir"))
