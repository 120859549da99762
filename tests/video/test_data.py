"""The procedural moving-shapes generator and the real-clip sampler."""

import numpy as np
import pytest

from specvideo.video.data import (
    TRAIN_SEEDS,
    TUNING_SEEDS,
    VALIDATION_SEEDS,
    RealClips,
    ShapesConfig,
    moving_shapes,
    sample_video_paths,
    split_real,
    split_synthetic,
)


def test_moving_shapes_is_deterministic_by_seed():
    a, b = moving_shapes(7, 10, 32), moving_shapes(7, 10, 32)
    assert a.shape == (10, 32, 32, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, moving_shapes(8, 10, 32))


def test_moving_shapes_move_and_any_resolution():
    frames = moving_shapes(3, 6, 48)
    assert frames.shape == (6, 48, 48, 3)
    assert np.abs(np.diff(frames.astype(int), axis=0)).mean() > 0.1  # something moves


def test_shapes_stay_in_the_world_under_gravity():
    cfg = ShapesConfig(p_gravity=1.0, p_pan=0.0, p_texture=0.0, margin=0.0)
    frames = moving_shapes(5, 200, 32, cfg)
    # With no margin the world is the view: bounces keep every shape visible, so late frames still
    # differ from the plain background colour in more than a few pixels.
    background = frames[-1][0, 0]
    assert (np.abs(frames[-1].astype(int) - background).sum(-1) > 30).sum() > 10


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_frames"):
        moving_shapes(0, 0, 32)


def test_validation_seeds_disjoint_from_training_and_tuning():
    assert VALIDATION_SEEDS.start >= TRAIN_SEEDS.stop
    assert TUNING_SEEDS.start >= VALIDATION_SEEDS.stop and TUNING_SEEDS.start >= TRAIN_SEEDS.stop
    clips = split_synthetic(2, 4, 16)
    np.testing.assert_array_equal(clips[0], moving_shapes(VALIDATION_SEEDS[0], 4, 16))
    tuning = split_synthetic(2, 4, 16, split="tuning")
    np.testing.assert_array_equal(tuning[1], moving_shapes(TUNING_SEEDS[1], 4, 16))


def test_real_clips_split_and_crops():
    paths = sample_video_paths()
    assert [p.name for p in paths] == ["bikes.mp4", "bigbuckbunny.mp4"]
    train, tuning, validation = RealClips("train", 32), RealClips("tuning", 32), RealClips("validation", 32)
    for t, u, h in zip(train.videos, tuning.videos, validation.videos):
        total = t.shape[0] + u.shape[0] + h.shape[0]
        assert t.shape[0] == int(0.7 * total) and t.shape[0] + u.shape[0] == int(0.85 * total)
        assert h.shape[0] >= 18  # a benchmark clip: 2 context + 16 frames
    assert not np.array_equal(split_real(1, 4, 32)[0], split_real(1, 4, 32, split="tuning")[0])
    clip = train.sample(np.random.default_rng(0), 5)
    assert clip.shape == (5, 32, 32, 3) and clip.dtype == np.uint8
    real = split_real(3, 4, 32)
    assert len(real) == 3 and all(c.shape == (4, 32, 32, 3) for c in real)
    with pytest.raises(ValueError, match="split"):
        RealClips("test")
    with pytest.raises(ValueError, match="frames"):
        validation.sample(np.random.default_rng(0), 10_000)
