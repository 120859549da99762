"""Every draft the verifier scores is recorded in VideoSpecStats.scored_drafts."""

import json
import math

import numpy as np
import torch

from specvideo.video.drafters import LinearDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests.helpers import tiny_unet

P, SIZE, N = 2, 16, 3


def tiny_pipe() -> SpeculativeVideoPipeline:
    unet = tiny_unet(SIZE, P)
    return SpeculativeVideoPipeline(DiffusionVerifier(unet), LinearDrafter())


def run(pipe, **kwargs):
    context = np.random.default_rng(0).integers(0, 256, (P, SIZE, SIZE, 3), dtype=np.uint8)
    return pipe(
        context,
        num_inference_steps=N,
        generator=torch.Generator().manual_seed(0),
        output_type="pt",
        progress=False,
        **kwargs,
    )


def test_scored_drafts_cover_every_scored_draft_with_its_position():
    pipe = tiny_pipe()
    tau = 0.0
    out = run(pipe, num_frames=9, num_draft_frames=4, schedule="constant", threshold=tau, strength=0.9)
    records = out.stats.scored_drafts
    assert len(records) == out.stats.drafted  # rejected and discarded drafts included
    assert sum(r.accepted for r in records) == out.stats.accepted
    assert all(r.score >= tau for r in records if r.accepted)
    assert all(0 <= r.index < 9 and r.draft.shape == (3, SIZE, SIZE) for r in records)
    # an emitted frame with a draft: its record holds that very draft and the frame's score
    for index, (draft, score) in enumerate(zip(out.drafts, out.stats.frame_scores)):
        if draft is None or score is None:
            continue
        record = next(r for r in records if r.index == index and r.score == score)
        torch.testing.assert_close(record.draft, draft)
    # the score is the similarity of the draft and its refinement: finite, an SSIM
    assert all(-1 <= r.score <= 1 and math.isfinite(r.score) for r in records)
    # positions: each round's drafts are 0, 1, ... from its start; the next round starts after the
    # accepted drafts and the correction (none when the round was accepted whole)
    start, rounds = 0, {}
    for r in records:
        rounds.setdefault(r.index - r.position, []).append(r)
    for begin, members in sorted(rounds.items()):
        assert begin == start and [r.position for r in members] == list(range(len(members)))
        accepted = sum(r.accepted for r in members)
        start = begin + accepted + (accepted < len(members))
    assert start == 9


def test_target_and_draft_modes_score_nothing_and_stats_stay_json():
    pipe = tiny_pipe()
    assert run(pipe, mode="target", num_frames=2).stats.scored_drafts == []
    assert run(pipe, mode="draft", num_frames=3).stats.scored_drafts == []
    stats = run(pipe, num_frames=3, threshold=-math.inf).stats
    as_json = json.loads(json.dumps(stats.to_dict()))
    assert [r["index"] for r in as_json["scored_drafts"]] == [r.index for r in stats.scored_drafts]
    assert all(set(r) == {"row", "index", "position", "score", "accepted"} for r in as_json["scored_drafts"])


def test_drafters_skip_the_frames_emitted_since_their_context():
    from specvideo.video.drafters import CopyLastDrafter, FlowDrafter

    context = torch.rand(2, P, 3, SIZE, SIZE) * 2 - 1
    for drafter in (LinearDrafter(), FlowDrafter(), CopyLastDrafter()):
        ahead = drafter.propose(context, 7)  # (2, 7, 3, H, W)
        torch.testing.assert_close(drafter.propose(context, 3, skip=4), ahead[:, 4:])


def test_rounds_draft_from_the_last_real_or_target_frame_with_the_motion_accumulated():
    """Every draft accepted: each round drafts from the real context, skipping what it emitted, so the
    output is the flow drafter's extrapolation of the context with the motion accumulated, not the
    flow re-estimated from its own drafts."""
    from specvideo.video.drafters import FlowDrafter

    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet(SIZE, P)), FlowDrafter())
    out = run(pipe, num_frames=9, num_draft_frames=3, schedule="constant", metric="typicality", threshold=-math.inf)
    assert out.stats.accepted == 9  # every draft kept
    context = torch.from_numpy(
        np.random.default_rng(0).integers(0, 256, (P, SIZE, SIZE, 3), dtype=np.uint8)
    ).permute(0, 3, 1, 2).float().div(127.5).sub(1)[None]  # (1, P, 3, H, W) as the pipeline reads it
    expected = FlowDrafter().propose(context, 9)[0]  # (9, 3, H, W)
    torch.testing.assert_close(out.frames.float(), expected.clamp(-1, 1), atol=2 / 255, rtol=0)
