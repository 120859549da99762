"""The video training recipe end to end on tiny models: a few steps, evaluation, resume, export."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from recipes import video
from specvideo.video.pipeline import SpeculativeVideoPipeline


def tiny(tmp_path, **kw):
    base = video.VideoTrainConfig(
        work=str(tmp_path / "work"),
        out=str(tmp_path / "out"),
        size=16,
        channels=(8, 16),
        batch_size=2,
        verifier_steps=2,
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


def test_verifier_and_drafter_train_resume_and_export(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0)
    result = video.train_verifier(cfg)
    assert result["steps"] == 2 and np.isfinite(result["tuning_loss"])
    assert 0 <= result["synthetic_ssim_copy"] <= 1
    log = [json.loads(line) for line in (tmp_path / "work/verifier/log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2 and "synthetic_ssim_generated" in log[-1]
    # Resuming continues from the checkpoint instead of starting over.
    again = video.train_verifier(replace(cfg, verifier_steps=3))
    assert again["steps"] == 3
    drafter = video.train_drafter(cfg)
    assert drafter["steps"] == 2 and drafter["params"] <= 500_000
    out = video.export(cfg, drafter="learned")
    pipe = SpeculativeVideoPipeline.from_pretrained(out)
    assert pipe.drafter_name == "learned" and pipe.verifier.num_context_frames == cfg.context_frames
    assert next(pipe.unet.parameters()).dtype == torch.float32  # fp16 on disk, fp32 in memory
    frames = pipe(
        np.zeros((2, 16, 16, 3), np.uint8), num_frames=2, num_inference_steps=2, progress=False
    ).frames
    assert frames.shape == (2, 16, 16, 3)
    grid = (tmp_path / "out" / "samples.png").read_bytes()
    assert grid.startswith(b"\x89PNG")


def test_hint_stage_starts_from_the_verifier_and_exports_a_hinted_pipeline(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0, hint_steps=2)
    with pytest.raises(ValueError, match="run video-verifier first"):
        video.train_verifier(cfg, stage="hint")
    video.train_verifier(cfg)
    result = video.train_verifier(cfg, stage="hint")
    assert result["steps"] == 2 and "synthetic_ssim_generated" in result
    log = (tmp_path / "work/hint/log.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["step"] == 2
    pipe = SpeculativeVideoPipeline.from_pretrained(video.export(cfg))
    assert pipe.verifier.hint == "flow" and pipe.unet.config.in_channels == 3 * (cfg.context_frames + 2)
    frames = pipe(
        np.zeros((2, 16, 16, 3), np.uint8), num_frames=2, num_inference_steps=2, progress=False
    ).frames
    assert frames.shape == (2, 16, 16, 3)


def test_residual_stage_starts_at_the_flow_warp_and_exports_a_residual_pipeline(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0, hint_steps=1, residual_steps=2, rollout_frames=2)
    with pytest.raises(ValueError, match="run video-hint first"):
        video.train_verifier(cfg, stage="residual")
    video.train_verifier(cfg)
    video.train_verifier(cfg, stage="hint")
    result = video.train_verifier(cfg, stage="residual")
    assert result["steps"] == 2 and 0 <= result["synthetic_rollout_flow"] <= 1
    assert "synthetic_rollout_generated" in result
    pipe = SpeculativeVideoPipeline.from_pretrained(video.export(cfg))
    assert pipe.verifier.residual and pipe.verifier.hint == "flow"
    frames = pipe(
        np.zeros((2, 16, 16, 3), np.uint8), num_frames=2, num_inference_steps=2, progress=False
    ).frames
    assert frames.shape == (2, 16, 16, 3)


def test_residual_stage_continues_from_committed_weights(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0, hint_steps=1, residual_steps=1, rollout_frames=2)
    video.train_verifier(cfg)
    video.train_verifier(cfg, stage="hint")
    video.train_verifier(cfg, stage="residual")
    shipped = video.export(cfg)  # fp16 residual weights, as committed
    again = replace(cfg, work=str(tmp_path / "work2"), residual_init=str(shipped / "unet"), residual_steps=2)
    unet, hint, steps, _ = video._stage_unet(again, "residual")
    saved = SpeculativeVideoPipeline.from_pretrained(shipped).unet
    assert hint == "flow" and steps == 2 and next(unet.parameters()).dtype == torch.float32
    torch.testing.assert_close(unet.conv_out.weight, saved.conv_out.weight)  # continued, not zeroed
    assert video.train_verifier(again, stage="residual")["steps"] == 2  # no hint stage needed in work2


def test_rollout_stage_fine_tunes_the_residual_on_its_own_frames(tmp_path):
    cfg = tiny(tmp_path, real_fraction=0.0, hint_steps=1, residual_steps=1, rollout_steps=2, rollout_frames=2)
    video.train_verifier(cfg)
    video.train_verifier(cfg, stage="hint")
    video.train_verifier(cfg, stage="residual")
    unet, _, steps, lr = video._stage_unet(cfg, "rollout")
    residual = video.UNet2DModel.from_pretrained(tmp_path / "work" / "residual" / "ema_unet")
    torch.testing.assert_close(unet.conv_out.weight, residual.conv_out.weight)  # kept, not zeroed
    assert (steps, lr) == (2, cfg.rollout_lr)
    assert video.train_verifier(cfg, stage="rollout")["steps"] == 2
    pipe = SpeculativeVideoPipeline.from_pretrained(video.export(cfg))  # the rollout stage is the newest
    assert pipe.verifier.residual and pipe.verifier.hint == "flow"


def test_rollout_loss_feeds_the_model_its_own_frames():
    """The loss of frame 2 depends on the model's frame 1, not on the true one: changing the true
    frame 1 changes only frame 1's term."""
    from recipes.video_losses import rollout_loss
    from specvideo.video.verifier import default_scheduler, make_residual, widen_for_hint
    from tests.helpers import tiny_unet

    unet = make_residual(widen_for_hint(tiny_unet(16, 2, norm_num_groups=4)))  # returns the warp exactly
    clips = video.ClipBatches(video.VideoTrainConfig(size=16, batch_size=2, real_fraction=0.0)).sample(
        np.random.default_rng(0), 4
    )
    one = rollout_loss(unet, default_scheduler(), clips[:, :3], np.random.default_rng(1))
    two = rollout_loss(unet, default_scheduler(), clips, np.random.default_rng(1))
    changed = clips.clone()
    changed[:, 2] = -changed[:, 2]  # the true frame 1: only its own term sees it
    two_changed = rollout_loss(unet, default_scheduler(), changed, np.random.default_rng(1))
    one_changed = rollout_loss(unet, default_scheduler(), changed[:, :3], np.random.default_rng(1))
    torch.testing.assert_close(2 * two - one, 2 * two_changed - one_changed)  # frame 2's term
    assert not torch.isclose(one, one_changed)


def test_unknown_verifier_stage_is_refused(tmp_path):
    with pytest.raises(ValueError, match="verifier stage must be one of"):
        video.train_verifier(tiny(tmp_path), stage="hnit")


def test_shipped_scale_fits_the_budget():
    cfg = video.VideoTrainConfig()
    assert video.num_params(video.make_unet(cfg)) <= 8_000_000
    assert video.num_params(video.make_predictor(cfg)) <= 500_000


def test_residual_augmentation_perturbs_only_its_shares(tmp_path):
    """With both shares 0 the residual stage's condition is exactly the pipeline's flow condition;
    with both 1 every row's context is noisier or its hint moved, and the context frames stay in range."""
    from specvideo.video.verifier import condition

    cfg = tiny(tmp_path, real_fraction=0.0, batch_size=4)
    window = video.ClipBatches(cfg).sample(np.random.default_rng(0), 2)  # (4, 2, 3, 16, 16)
    off = replace(cfg, residual_hint_aug_share=0.0, residual_context_noise_share=0.0)
    clean = condition(window, "flow")
    torch.testing.assert_close(video.augmented_condition(window, np.random.default_rng(1), off), clean)
    on = replace(cfg, residual_hint_aug_share=1.0, residual_context_noise_share=1.0)
    noisy = video.augmented_condition(window, np.random.default_rng(1), on)
    assert noisy.shape == clean.shape and noisy.abs().max() <= 1
    assert ((noisy - clean).abs().flatten(1).amax(1) > 0).all()


def test_train_only_videos_join_the_train_split_whole():
    from specvideo.video.data import TRAIN_ONLY_VIDEOS, RealClips

    train = RealClips("train", 16, train_only=TRAIN_ONLY_VIDEOS)
    assert len(train.videos) == len(RealClips("train", 16).videos) + len(TRAIN_ONLY_VIDEOS)
    assert len(RealClips("heldout", 16, train_only=TRAIN_ONLY_VIDEOS).videos) == 2  # never evaluated on


def test_cli_sets_the_stage_knobs(monkeypatch, capsys):
    """specvideo train video-rollout --lr/--min-lr-ratio/--unroll/--batch-size reach the rollout
    stage's own config fields; bad values are refused with the flag named."""
    from specvideo.cli import main

    seen = {}
    monkeypatch.setattr(video, "train_verifier", lambda cfg, stage: seen.update(cfg=cfg, stage=stage) or {})
    argv = [
        "train",
        "video-rollout",
        "--lr",
        "3e-5",
        "--min-lr-ratio",
        "1",
        "--unroll",
        "6",
        "--batch-size",
        "4",
    ]
    assert main(argv + ["--steps", "7"]) == 0
    cfg = seen["cfg"]
    assert seen["stage"] == "rollout" and cfg.rollout_steps == 7 and cfg.min_lr_ratio == 1.0
    assert (cfg.rollout_lr, cfg.rollout_unroll, cfg.rollout_batch_size) == (3e-5, 6, 4)
    assert cfg.batch_size == video.VideoTrainConfig().batch_size  # the other stages' batch untouched
    assert main(["train", "video-residual", "--lr", "2e-4"]) == 0 and seen["cfg"].residual_lr == 2e-4
    for bad, flag in (
        (["--unroll", "0"], "--unroll"),
        (["--min-lr-ratio", "2"], "--min-lr-ratio"),
        (["--lr", "0"], "--lr"),
    ):
        capsys.readouterr()
        assert main(["train", "video-rollout", *bad]) == 2
        assert f"{flag} must be" in capsys.readouterr().err
