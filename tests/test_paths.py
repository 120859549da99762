from pathlib import Path

from specvideo.paths import shown_path


def test_shown_path_is_relative_inside_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "models" / "video").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "models" / "video") == str(Path("models") / "video")
    outside = tmp_path.parent / "elsewhere"
    assert shown_path(outside) == str(outside)  # kept as given, not turned into ../
    assert shown_path(None) is None
