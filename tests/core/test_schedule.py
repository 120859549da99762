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


def test_row_schedules_keep_each_rows_own_k():
    from specvideo.core.schedule import RowSchedules, make_schedule
    from specvideo.core.types import Draft, Verdict

    rows = RowSchedules([make_schedule("heuristic", 3) for _ in range(2)])
    draft = Draft(items=torch.zeros(2, 3), lengths=torch.tensor([3, 3]))
    rows.update(draft, Verdict(num_accepted=torch.tensor([3, 0])), torch.tensor([True, True]))
    assert (rows.row_k(0), rows.row_k(1)) == (5, 2) and rows.draft_length() == 5
    # a row capped below its k that accepts everything it proposed still counts as all accepted
    draft = Draft(items=torch.zeros(2, 5), lengths=torch.tensor([5, 2]))
    rows.update(draft, Verdict(num_accepted=torch.tensor([1, 2])), torch.tensor([True, True]))
    assert (rows.row_k(0), rows.row_k(1)) == (4, 4)
    draft = Draft(items=torch.zeros(2, 4), lengths=torch.tensor([4, 0]))
    rows.update(draft, Verdict(num_accepted=torch.tensor([4, 0])), torch.tensor([True, False]))
    assert (rows.row_k(0), rows.row_k(1)) == (6, 4) and rows.draft_length() == 6  # row 1 finished
