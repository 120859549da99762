"""Real clips at their own scale: sources, time splits, native-scale crops, the opencv-doc clips when
fetched (faked here with small AVIs in a temporary cache), and the fetch script's refusal."""

import cv2
import numpy as np
import pytest

from specvideo.video import real


def fake_opencv_cache(root, frames=40):
    folder = root / "video-data" / "opencv"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in real.OPENCV_CLIPS:
        writer = cv2.VideoWriter(str(folder / name), cv2.VideoWriter_fourcc(*"MJPG"), 10, (400, 300))
        for _ in range(frames):
            writer.write(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8))
        writer.release()
    return folder


def test_opencv_clips_are_optional_unless_required(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    assert real.opencv_clip_paths() == []
    with pytest.raises(ValueError, match="run scripts/fetch_opencv_clips.sh"):
        real.opencv_clip_paths(required=True)
    names = [v.name for v in real.load_real_videos("validation", max_side=96)]
    assert names == ["bikes.mp4", "bigbuckbunny.mp4"]
    fake_opencv_cache(tmp_path)
    videos = real.load_real_videos("validation", max_side=96)
    assert [v.name for v in videos][2:] == list(real.OPENCV_CLIPS)
    assert videos[2].frames.shape == (6, 72, 96, 3)  # the last 15 % of 40 frames, longer side 96
    assert [v.name for v in real.load_real_videos("tuning", 96, opencv=False)] == [
        "bikes.mp4",
        "bigbuckbunny.mp4",
    ]


def test_splits_are_disjoint_in_time(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    fake_opencv_cache(tmp_path)
    parts = {
        s: real.load_real_videos(s, 64, train_only=False)[2].frames for s in ("train", "tuning", "validation")
    }
    assert [len(p) for p in parts.values()] == [28, 6, 6]
    whole = real.read_video(real.opencv_clip_paths()[0], max_side=64).frames
    np.testing.assert_array_equal(np.concatenate(list(parts.values())), whole)
    train = real.load_real_videos("train", 64)
    assert train[-1].name == "carphone_pristine.mp4"  # train-only, whole


def test_native_crops_are_cut_at_the_clip_scale(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    clips = real.NativeClips("train", crop=32, long_sides=(64,), opencv=False)
    rng = np.random.default_rng(0)
    clip = clips.sample(rng, 3, video=0)
    assert clip.shape == (3, 32, 32, 3) and clip.dtype == np.uint8
    # at the working scale of the video itself, a crop is a plain window of its frames
    same = real.NativeClips("train", crop=32, long_sides=(320,), opencv=False)
    video = same.videos[0].frames
    window = same.sample(np.random.default_rng(1), 2, video=0)
    best = min(cv2.matchTemplate(frame, window[0], cv2.TM_SQDIFF).min() for frame in video)
    assert best == 0, "the crop is not an exact window of a frame of the video at its own scale"
    with pytest.raises(ValueError, match="every long side >= crop"):
        real.NativeClips("train", crop=128, long_sides=(64,))
    # every 3rd frame: the first and second frames of a stepped window are frames i and i + 3
    stepped = same.sample(np.random.default_rng(1), 2, video=0, step=3)
    starts = [i for i, frame in enumerate(video) if cv2.matchTemplate(frame, stepped[0], cv2.TM_SQDIFF).min() == 0]
    assert any(cv2.matchTemplate(video[i + 3], stepped[1], cv2.TM_SQDIFF).min() == 0 for i in starts)
    with pytest.raises(ValueError, match="frame step must be"):
        same.sample(np.random.default_rng(1), 2, step=0)


def test_evaluation_frames_are_whole_frames(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    fake_opencv_cache(tmp_path)
    clips = real.evaluation_frames("validation", 6, max_side=80, opencv=True)
    assert [c.frames.shape for c in clips[2:]] == [(6, 60, 80, 3)] * 3
    with pytest.raises(ValueError, match="evaluation split"):
        real.evaluation_frames("train", 6, 80)


def test_the_test_split_is_its_own_clips_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="run scripts/fetch_test_clips.sh"):
        real.load_real_videos("test")
    assert real.TEST_CLIPS == ("balle-jbart.mp4", "balle1-vp9.avi", "cityCC0.mpg", "cockatoo.mp4")
    monkeypatch.setattr(real, "TEST_CLIPS", ("a.avi", "b.avi"))  # fakes in a container MJPG fits
    folder = tmp_path / "video-data" / "test"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for name in real.TEST_CLIPS:
        writer = cv2.VideoWriter(str(folder / name), cv2.VideoWriter_fourcc(*"MJPG"), 10, (160, 120))
        for _ in range(12):
            writer.write(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8))
        writer.release()
    videos = real.load_real_videos("test", max_side=80)
    assert [v.name for v in videos] == list(real.TEST_CLIPS)
    assert all(v.frames.shape == (12, 60, 80, 3) for v in videos)  # whole: nothing trained on them
    # none of the train / tuning / held-out sources is a test clip
    assert not set(real.TEST_CLIPS) & {v.name for v in real.load_real_videos("validation", 96, opencv=False)}
