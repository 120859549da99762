"""The video recipe's drafter stage and its CLI on tiny models: a few steps, evaluation, resume; the
export of a sampler stage is tested beside that stage (test_video_sampler.py)."""

import json
from dataclasses import replace

import numpy as np
import pytest

from recipes import video


def tiny(tmp_path, **kw):
    base = video.VideoTrainConfig(
        work=str(tmp_path / "work"),
        out=str(tmp_path / "out"),
        size=16,
        batch_size=2,
        drafter_steps=2,
        drafter_hidden=8,
        eval_every=2,
        eval_sequences=2,
        warmup=1,
        grid_frames=4,
    )
    return replace(base, **kw)


def test_batches_mix_synthetic_and_real(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.5, batch_size=6)
    batch = video.ClipBatches(cfg).sample(np.random.default_rng(0), 3)
    assert batch.shape == (6, 3, 3, 16, 16)
    assert batch.min() >= -1 and batch.max() <= 1


def test_drafter_trains_resumes_and_logs(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0)
    drafter = video.train_drafter(cfg)
    assert drafter["steps"] == 2 and drafter["params"] <= 500_000
    assert 0 <= drafter["tuning_ssim_copy_1"] <= 1
    log = [json.loads(line) for line in (tmp_path / "work/drafter/log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2 and "tuning_ssim_1" in log[-1]
    again = video.train_drafter(replace(cfg, drafter_steps=3))  # resumed from the checkpoint
    assert again["steps"] == 3
    assert (tmp_path / "work/drafter/model").is_dir()


def test_export_needs_the_sampler_stage(tmp_path):
    with pytest.raises(ValueError, match="no sampler stage in .*run specvideo train video-sampler"):
        video.export(tiny(tmp_path))


def test_shipped_drafter_fits_the_budget():
    assert video.num_params(video.make_predictor(video.VideoTrainConfig())) <= 500_000


def test_the_superseded_stages_are_gone(capsys):
    """verifier -> hint -> residual -> rollout live in git history (recipes/video.py says where)."""
    from specvideo.cli import build_parser

    for stage in ("verifier", "hint", "residual", "rollout"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["train", f"video-{stage}"])
    assert "git show" in video.__doc__


def test_cli_sets_the_drafter_knobs(monkeypatch, capsys):
    """specvideo train video-drafter --lr/--min-lr-ratio/--unroll/--batch-size reach the drafter's
    config fields; bad values are refused with the flag named."""
    from specvideo.cli import main

    seen = {}
    monkeypatch.setattr(video, "train_drafter", lambda cfg: seen.update(cfg=cfg) or {})
    argv = ["train", "video-drafter", "--lr", "3e-5", "--min-lr-ratio", "1", "--unroll", "6", "--batch-size", "4"]
    assert main(argv + ["--steps", "7"]) == 0
    cfg = seen["cfg"]
    assert cfg.drafter_steps == 7 and cfg.min_lr_ratio == 1.0
    assert (cfg.drafter_lr, cfg.drafter_unroll, cfg.batch_size) == (3e-5, 6, 4)
    for bad, flag in (
        (["--unroll", "0"], "--unroll"),
        (["--min-lr-ratio", "2"], "--min-lr-ratio"),
        (["--lr", "0"], "--lr"),
    ):
        capsys.readouterr()
        assert main(["train", "video-drafter", *bad]) == 2
        assert f"{flag} must be" in capsys.readouterr().err


def test_train_only_videos_join_the_train_split_whole():
    from specvideo.video.data import TRAIN_ONLY_VIDEOS, RealClips

    train = RealClips("train", 16, train_only=TRAIN_ONLY_VIDEOS)
    assert len(train.videos) == len(RealClips("train", 16).videos) + len(TRAIN_ONLY_VIDEOS)
    assert len(RealClips("validation", 16, train_only=TRAIN_ONLY_VIDEOS).videos) == 2  # never evaluated on
