import pytest
import torch

from specvideo.core.schedule import ConfidenceSchedule, ConstantSchedule, HeuristicSchedule, make_schedule
from specvideo.core.types import Draft, Verdict


def round_with(k, accepted, active=None):
    B = len(accepted)
    draft = Draft(items=torch.zeros(B, k, dtype=torch.long), lengths=torch.full((B,), k))
    active = torch.ones(B, dtype=torch.bool) if active is None else torch.tensor(active)
    return draft, Verdict(num_accepted=torch.tensor(accepted)), active


def test_constant_never_changes():
    s = ConstantSchedule(4)
    s.update(*round_with(4, [0]))
    s.update(*round_with(4, [4]))
    assert s.draft_length() == 4
    assert s.keep_drafting(torch.tensor([0.0]))


def test_heuristic_plus_two_minus_one_bounded():
    s = HeuristicSchedule(3, k_min=1, k_max=6)
    s.update(*round_with(3, [3]))
    assert s.draft_length() == 5
    s.update(*round_with(5, [5]))
    assert s.draft_length() == 6  # capped at k_max
    for _ in range(10):
        s.update(*round_with(s.draft_length(), [0]))
    assert s.draft_length() == 1  # floored at k_min


def test_heuristic_batch_grows_only_when_every_active_row_accepted_all():
    s = HeuristicSchedule(4)
    s.update(*round_with(4, [4, 1]))
    assert s.draft_length() == 3
    s.update(*round_with(3, [3, 0], active=[True, False]))  # the finished row does not count
    assert s.draft_length() == 5


def test_confidence_stops_when_every_row_is_unsure():
    s = ConfidenceSchedule(8, threshold=0.5)
    assert s.keep_drafting(torch.tensor([0.9, 0.1]))
    assert not s.keep_drafting(torch.tensor([0.4, 0.1]))
    assert s.draft_length() == 8


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_bad_draft_length(k):
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        make_schedule("constant", k)


def test_unknown_schedule_name():
    with pytest.raises(ValueError, match="unknown schedule 'fast'"):
        make_schedule("fast", 3)
