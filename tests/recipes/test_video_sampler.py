"""The sampler stage of the video target on a tiny UNet: the noise-level embedding starts neutral,
the loss weighting, a few steps with evaluation and resume, and the CLI's knobs."""

import json

import numpy as np
import pytest
import torch

from recipes import video_sampler as vs
from specvideo.video.conditioning import widen_for_hint
from specvideo.video.verifier import DiffusionVerifier, default_scheduler
from tests import helpers

P = 2


@pytest.fixture(autouse=True)
def no_opencv_clips(tmp_path, monkeypatch):
    """The default test run does not need the fetched opencv-doc clips: an empty cache."""
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path / "cache"))


def hinted(seed=0):
    return widen_for_hint(helpers.tiny_unet(16, P, seed, norm_num_groups=4))


def test_noise_level_embedding_starts_as_the_model_it_widens():
    unet = hinted()
    wide = vs.with_noise_level_embedding(unet)
    assert wide.config.class_embed_type == "timestep"
    x, t = torch.randn(3, unet.config.in_channels, 16, 16), torch.tensor([5, 500, 999])
    levels = torch.tensor([0, 100, 250])
    torch.testing.assert_close(wide(x, t, class_labels=levels).sample, unet(x, t).sample)
    with torch.no_grad():
        wide.class_embedding.linear_2.weight.normal_()
    assert not torch.allclose(
        wide(x, t, class_labels=levels).sample, wide(x, t, class_labels=levels * 0).sample
    )
    assert vs.with_noise_level_embedding(wide) is wide


def test_loss_weight_is_one_plus_snr_truncated():
    scheduler = default_scheduler()
    w = vs.loss_weight(scheduler, torch.tensor([0, 500, 999]), gamma=5.0)
    abar = scheduler.alphas_cumprod[500]
    assert w[0] == 6.0 and w[2] == pytest.approx(1.0, abs=1e-3)  # clean: capped; pure noise: 1
    assert w[1] == pytest.approx(min(1 + abar / (1 - abar), 6.0))


def test_noisy_condition_noises_only_the_context_to_its_level():
    scheduler = default_scheduler()
    window = torch.rand(2, P, 3, 16, 16) * 2 - 1
    noise = torch.randn_like(window)
    clean = vs.noisy_condition(scheduler, window, torch.tensor([0, 0]), noise, torch.ones(2))
    noisy = vs.noisy_condition(scheduler, window, torch.tensor([0, 300]), noise, torch.ones(2))
    torch.testing.assert_close(noisy[0], clean[0], atol=0.02, rtol=0)  # level 0: nearly the frames
    assert (noisy[1, : 3 * P] - clean[1, : 3 * P]).abs().mean() > 0.1
    torch.testing.assert_close(noisy[:, 3 * P :], clean[:, 3 * P :])  # the hint: from the clean frames
    copy = vs.noisy_condition(scheduler, window, torch.tensor([0, 0]), noise, torch.zeros(2))
    torch.testing.assert_close(copy[:, 3 * P :], window[:, -1])  # velocity scale 0: copy the last frame


def tiny_cfg(tmp_path, init, **kw):
    base = dict(
        work=str(tmp_path / "work"),
        init=str(init),
        pixels_per_batch=2 * 64 * 64,
        steps=2,
        warmup=1,
        eval_every=2,
        eval_sequences=2,
        eval_steps=(1, 2),
        eval_rollout=2,
        rollout_share=0.5,
        rollout_steps=(1,),
    )
    return vs.SamplerConfig(**{**base, **kw})


def test_sampler_stage_trains_evaluates_resumes_and_runs_in_the_pipeline(tmp_path):
    init = tmp_path / "init"
    hinted().save_pretrained(init)
    cfg = tiny_cfg(tmp_path, init)
    result = vs.train_sampler(cfg)
    assert result["steps"] == 2 and np.isfinite(result["loss"]) and np.isfinite(result["tuning_x0_mse"])
    assert {"synthetic_ssim_N2", "real_sharp_N1", "real_rollout_sharp", "synthetic_rollout_ssim"} <= set(
        result
    )
    log = [json.loads(line) for line in (tmp_path / "work/sampler/log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2
    from dataclasses import replace

    assert vs.train_sampler(replace(cfg, steps=3))["steps"] == 3  # resumed from the checkpoint
    unet = vs.UNet2DModel.from_pretrained(tmp_path / "work/sampler/ema_unet")
    verifier = DiffusionVerifier(unet, hint="flow", residual=True, context_noise_level=30)
    assert verifier.takes_context_noise
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    pipe = SpeculativeVideoPipeline(verifier)
    context = np.random.default_rng(0).integers(0, 256, (P, 24, 40, 3), dtype=np.uint8)

    def run(**kw):
        g = torch.Generator().manual_seed(0)
        return pipe(
            context, num_frames=3, num_inference_steps=2, generator=g, output_type="pt", progress=False, **kw
        )

    target = run(mode="target")
    assert target.frames.shape == (3, 3, 24, 40)
    rejected = run(threshold=float("inf"), num_draft_frames=2, schedule="constant")
    torch.testing.assert_close(rejected.frames, target.frames, rtol=0, atol=0)
    verifier.context_noise_level = 0
    assert not torch.equal(run(mode="target").frames, target.frames)  # the level reaches the model


def test_export_writes_the_sampler_with_its_context_noise_and_scheduler(tmp_path):
    from recipes.video import VideoTrainConfig, export
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    init = tmp_path / "init"
    hinted().save_pretrained(init)
    vs.train_sampler(tiny_cfg(tmp_path, init, steps=1))
    out = export(
        VideoTrainConfig(work=str(tmp_path / "work"), out=str(tmp_path / "out"), grid_frames=4),
        "flow",
        30,
        "ddpm",
    )
    pipe = SpeculativeVideoPipeline.from_pretrained(out)
    v = pipe.verifier
    assert (v.context_noise_level, v.residual, v.hint, v.takes_context_noise) == (30, True, "flow", True)
    assert type(pipe.scheduler).__name__ == "DDPMScheduler"
    g = [torch.Generator().manual_seed(0) for _ in range(2)]
    frames = [
        pipe(
            np.zeros((P, 24, 32, 3), np.uint8),
            num_frames=2,
            num_inference_steps=2,
            generator=x,
            progress=False,
        ).frames
        for x in g
    ]
    np.testing.assert_array_equal(frames[0], frames[1])  # a stochastic sampler, reproducible per seed


def test_rollout_context_is_the_models_own_samples_after_the_true_frames():
    unet = vs.with_noise_level_embedding(hinted())
    unet.train()
    cfg = vs.SamplerConfig(rollout_share=1.0, rollout_frames=2, rollout_steps=(2,))
    clips = torch.rand(3, P + 2, 3, 16, 16) * 2 - 1  # P true frames, then R frames to replace
    context = vs.rollout_context(unet, clips, np.random.default_rng(0), cfg)
    assert context.shape == (3, P, 3, 16, 16) and unet.training and not context.is_inference()
    g = torch.Generator().manual_seed(0)
    rollout = vs.sample_rollout(unet, clips[:, :P], 2, 2, g)
    torch.testing.assert_close(rollout[:, :P], clips[:, :P])  # the true context comes first
    assert not torch.allclose(context, clips[:, -P:])  # the R frames are sampled, not the truth
    # the sampled frames differ with the generator; the same seed reproduces them
    again = vs.rollout_context(unet, clips, np.random.default_rng(0), cfg)
    torch.testing.assert_close(again, context, rtol=0, atol=0)
    # with rollout_share, a clip is P + R + 1 frames and the loss still trains end to end
    assert vs.clip_frames(cfg) == P + 3 and vs.clip_frames(vs.SamplerConfig()) == P + 1
    full = torch.rand(3, P + 3, 3, 16, 16) * 2 - 1
    loss = vs.sampler_loss(unet, default_scheduler(), full, np.random.default_rng(1), cfg)
    loss.backward()
    assert torch.isfinite(loss) and unet.conv_in.weight.grad is not None


def test_batches_mix_shapes_and_native_real_crops(tmp_path):
    cfg = vs.SamplerConfig(crops=(32, 64), crop_weights=(0.5, 0.5), pixels_per_batch=4 * 32 * 32)
    batches = vs.SamplerBatches(cfg)
    rng = np.random.default_rng(0)
    shapes = {tuple(batches.sample(rng, 3).shape) for _ in range(6)}
    assert shapes == {(4, 3, 3, 32, 32), (1, 3, 3, 64, 64)}


def test_cli_maps_its_flags_to_the_config(monkeypatch, capsys):
    from specvideo.cli import main

    seen = {}
    monkeypatch.setattr(vs, "train_sampler", lambda cfg: seen.setdefault("cfg", cfg) and {"steps": 0})
    assert (
        main(
            [
                "train",
                "video-sampler",
                "--steps",
                "7",
                "--lr",
                "3e-5",
                "--context-noise-max",
                "100",
                "--threads",
                "1",
                "--rollout-share",
                "0.5",
                "--eval-rollout",
                "6",
            ]
        )
        == 0
    )
    cfg = seen["cfg"]
    assert (cfg.steps, cfg.lr, cfg.context_noise_max, cfg.threads) == (7, 3e-5, 100, 1)
    assert (cfg.rollout_share, cfg.rollout_frames, cfg.eval_rollout) == (0.5, 2, 6)
    assert main(["train", "video-sampler", "--context-noise-max", "1000"]) == 2
    assert "--context-noise-max is out of range: 1000" in capsys.readouterr().err


def test_a_compact_resume_point_continues_the_run(tmp_path):
    from dataclasses import replace

    init = tmp_path / "init"
    hinted().save_pretrained(init)
    cfg = tiny_cfg(tmp_path, init, steps=2)
    vs.train_sampler(cfg)
    point = vs.write_resume_point(cfg, tmp_path / "point")
    meta = json.loads((point / "resume.json").read_text())
    assert meta["step"] == 2 and meta["ema_step"] == 2
    from safetensors.torch import load_file

    stored = load_file(point / "unet" / "diffusion_pytorch_model.safetensors")
    assert {t.dtype for t in stored.values()} == {torch.float16}  # compact: fp16 on disk
    assert vs.UNet2DModel.from_pretrained(point / "ema_unet").config.class_embed_type == "timestep"
    fresh = replace(cfg, work=str(tmp_path / "work2"), resume_from=str(point), steps=3)
    assert vs.train_sampler(fresh)["steps"] == 3  # continued from step 2, not from 0
    log = (tmp_path / "work2" / "sampler" / "log.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in log] == [3]


def test_v_prediction_recovers_x0_and_dropped_hints_are_zeros():
    scheduler = default_scheduler("v_prediction")
    x0, noise = torch.rand(4, 3, 16, 16) * 2 - 1, torch.randn(4, 3, 16, 16)
    t = torch.tensor([0, 300, 600, 999])
    x_t = scheduler.add_noise(x0, noise, t)
    v = scheduler.get_velocity(x0, noise, t)

    class Oracle(torch.nn.Module):  # a UNet that predicts the true v
        def forward(self, sample, timestep, class_labels=None):
            return type("Out", (), {"sample": v})

    cond = torch.zeros(4, 3 * P + 3, 16, 16)
    torch.testing.assert_close(vs.model_x0(Oracle(), scheduler, x_t, cond, t, None, "v"), x0, atol=1e-4, rtol=0)
    cond = torch.ones(1000, 3 * P + 3, 2, 2)
    dropped = vs.drop_hint(cond, 0.5, np.random.default_rng(0))
    zero = dropped[:, -3:].abs().sum(dim=(1, 2, 3)) == 0  # (1000,)
    assert 0.4 < zero.float().mean() < 0.6 and torch.equal(dropped[:, :-3], cond[:, :-3])


def test_a_v_sampler_with_hint_dropout_trains_logs_its_check_and_exports_a_hint_free_check(tmp_path):
    from recipes.video import VideoTrainConfig, export
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    init = tmp_path / "init"
    hinted().save_pretrained(init)
    cfg = tiny_cfg(tmp_path, init, prediction="v", hint_dropout=0.5, rollout_share=0.0, eval_rollout=0)
    result = vs.train_sampler(cfg)
    assert {"check_t300_frozen", "check_t100_flow", "check_t500_other"} <= set(result)
    assert all(0 <= result[k] <= 1 for k in result if k.startswith("check_"))
    out = export(VideoTrainConfig(work=str(tmp_path / "work"), out=str(tmp_path / "out"), grid_frames=0),
                 "flow", 0, "ddpm", prediction="v", check_hint=False)
    v = SpeculativeVideoPipeline.from_pretrained(out).verifier
    assert (v.residual, v.check_hint, v.scheduler.config.prediction_type) == (False, False, "v_prediction")
    with pytest.raises(ValueError, match="check_hint=False scores drafts on the hint-free branch"):
        DiffusionVerifier(v.unet, hint="flow", residual=True, check_hint=False)


def test_repa_and_perceptual_terms_train_the_projection_and_resume_it(tmp_path, monkeypatch):
    from dataclasses import replace

    from recipes.video_repa import Alignment, feature_loss
    from specvideo.video import pretrained

    monkeypatch.setattr(pretrained, "_NETWORK", None)
    pretrained.feature_maps(torch.zeros(1, 3, 32, 32))  # the network first loaded in inference mode

    unet = hinted().train()
    alignment = Alignment(unet.config.block_out_channels[-1], hidden=8)
    x0, t = torch.rand(2, 3, 16, 16) * 2 - 1, torch.tensor([10, 900])
    with alignment.capture(unet):
        unet(torch.randn(2, unet.config.in_channels, 16, 16), t)
        hidden = alignment.captured  # the mid-block's output
    assert alignment.captured is None and hidden.shape[:2] == (2, 16)
    alpha_bar = default_scheduler().alphas_cumprod[t]
    pred = x0.clone().requires_grad_()
    assert feature_loss(alignment, hidden, pred, x0, alpha_bar, 0.0, 0.0) == 0  # both off: nothing
    same = feature_loss(alignment, hidden, pred, x0, alpha_bar, 0.0, 1.0)
    assert same.item() == pytest.approx(0.0, abs=1e-6)  # perceptual: 0 on the clean frame itself
    far = feature_loss(alignment, hidden, -x0, x0, alpha_bar, 0.0, 1.0)
    assert far > 0.01
    repa = feature_loss(alignment, hidden, pred, x0, alpha_bar, 1.0, 0.0)
    assert -1 <= repa.item() <= 1
    repa.backward()
    assert alignment.projector[0].weight.grad.abs().sum() > 0
    init = tmp_path / "init"
    hinted().save_pretrained(init)
    cfg = tiny_cfg(
        tmp_path,
        init,
        prediction="v",
        rollout_share=0.0,
        eval_rollout=0,
        repa_weight=0.5,
        perceptual_weight=0.1,
    )
    assert np.isfinite(vs.train_sampler(cfg)["loss"])
    saved = torch.load(tmp_path / "work/sampler/checkpoint.pt", weights_only=False)
    assert any(k.startswith("projector.") for k in saved["aux"])  # the projection resumes with the run
    assert vs.train_sampler(replace(cfg, steps=3))["steps"] == 3
    exported = vs.UNet2DModel.from_pretrained(tmp_path / "work/sampler/ema_unet")
    assert not any("projector" in k for k in exported.state_dict())  # dropped at export
    point = vs.write_resume_point(cfg, tmp_path / "point")  # a resume point keeps the projection
    seeded = torch.load(
        vs.seed_checkpoint(replace(cfg, work=str(tmp_path / "w3")), point), weights_only=False
    )
    last = torch.load(tmp_path / "work/sampler/checkpoint.pt", weights_only=False)["aux"][
        "projector.0.weight"
    ]
    torch.testing.assert_close(seeded["aux"]["projector.0.weight"], last, atol=1e-3, rtol=1e-2)


def test_a_gated_sampler_widens_its_init_trains_with_the_confidence_and_exports_it(tmp_path):
    """--confidence: the init UNet gets the confidence channel (zero-initialised), training and the
    rollout condition on it, and the export's verifier gates its residual by it."""
    from recipes.video import VideoTrainConfig, export
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    init = tmp_path / "init"
    hinted().save_pretrained(init)
    result = vs.train_sampler(tiny_cfg(tmp_path, init, steps=1, eval_every=1, confidence=True))
    assert np.isfinite(result["loss"]) and np.isfinite(result["tuning_x0_mse"])
    unet = vs.UNet2DModel.from_pretrained(tmp_path / "work/sampler/ema_unet")
    assert unet.config.in_channels == hinted().config.in_channels + 1
    out = export(VideoTrainConfig(work=str(tmp_path / "work"), out=str(tmp_path / "out"), grid_frames=0))
    pipe = SpeculativeVideoPipeline.from_pretrained(out)
    assert pipe.verifier.confidence and pipe.verifier.residual
    scheduler = default_scheduler()
    window = torch.rand(2, P, 3, 16, 16) * 2 - 1
    cond = vs.noisy_condition(scheduler, window, torch.tensor([0, 0]), torch.randn_like(window), torch.ones(2), "flow", True)
    assert cond.shape[1] == 3 * P + 4 and 0 <= cond[:, 3 * P].min() and cond[:, 3 * P].max() <= 1
