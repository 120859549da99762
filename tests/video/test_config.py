"""One VideoConfig: the pipeline takes it whole, keyword arguments of the same names go over it,
threshold None is the metric's own tau, unknown names are refused; the CLI builds the same one."""

import numpy as np
import pytest
import torch

from specvideo.video.config import DEFAULT_THRESHOLDS, VIDEO_DEFAULTS, VideoConfig
from tests.conftest import tiny_video_pipeline


def test_a_config_whole_equals_the_same_settings_by_name():
    pipe = tiny_video_pipeline()
    context = np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)

    def run(*args, **kw):
        g = torch.Generator().manual_seed(0)
        return pipe(context, *args, generator=g, output_type="pt", progress=False, **kw).frames

    config = VideoConfig(num_frames=3, num_inference_steps=2, num_draft_frames=2, metric="ssim")
    by_name = run(num_frames=3, num_inference_steps=2, num_draft_frames=2, metric="ssim")
    torch.testing.assert_close(run(config), by_name, rtol=0, atol=0)
    over = run(config, num_frames=2)  # a keyword over the config
    assert over.shape[0] == 2


def test_threshold_none_is_the_metrics_own_and_unknown_names_are_refused():
    assert VIDEO_DEFAULTS.threshold is None and VIDEO_DEFAULTS.tau == DEFAULT_THRESHOLDS["typicality"]
    assert VIDEO_DEFAULTS.updated(metric="psnr").tau == 30.0
    assert VIDEO_DEFAULTS.updated(metric="psnr", threshold=25.0).tau == 25.0
    with pytest.raises(ValueError, match=r"unknown video setting\(s\) \['steps'\]"):
        VIDEO_DEFAULTS.updated(steps=3)
    with pytest.raises(ValueError, match="unknown video setting"):
        tiny_video_pipeline()(np.zeros((2, 16, 16, 3), np.uint8), steps=3, progress=False)


def test_the_cli_builds_one_config_with_one_name_per_setting():
    from specvideo.cli import build_parser
    from specvideo.cli.video import settings

    args = build_parser().parse_args(
        ["video", "clip.mp4", "--out", "o.mp4", "--steps", "5", "--refine-steps", "2", "-k", "3", "--seed", "4"]
    )
    config = settings(args)
    assert (config.num_inference_steps, config.num_refine_steps, config.num_draft_frames, config.seed) == (5, 2, 3, 4)
    assert config.drafter == VIDEO_DEFAULTS.drafter and config.threshold is None
