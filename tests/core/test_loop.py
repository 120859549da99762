"""The loop over a toy domain: the 'target' knows a fixed integer sequence, the drafter guesses it
and is wrong at known places. No model code: the core knows nothing about tokens or pixels."""

import torch

from specvideo.core.acceptance import greedy_match
from specvideo.core.loop import speculate
from specvideo.core.schedule import ConstantSchedule, HeuristicSchedule
from specvideo.core.types import Draft, SpecStats

TRUTH = list(range(100, 200))


class ToyDrafter:
    """Proposes the true sequence except at positions listed in ``wrong``, from the output so far
    (the verifier's, which it reads and never writes)."""

    def __init__(self, wrong, history):
        self.wrong, self.history, self.calls = set(wrong), history, 0

    def propose(self, k, keep_drafting):
        pos = len(self.history)
        items = [TRUTH[pos + i] + (1 if pos + i in self.wrong else 0) for i in range(k)]
        self.calls += k
        return Draft(items=torch.tensor([items], dtype=torch.long).reshape(1, k), lengths=torch.tensor([k]))


class ToyVerifier:
    def __init__(self, n):
        self.n, self.out, self.calls = n, [], 0
        self.active = torch.tensor([True])

    @property
    def finished(self):
        return len(self.out) >= self.n

    @property
    def target_only_calls(self):
        return len(self.out)

    def max_draft_length(self):
        return self.n - len(self.out) - 1

    def verify(self, draft):
        self.calls += 1
        start = len(self.out)
        return torch.tensor([TRUTH[start : start + draft.k + 1]])  # (1, k+1)

    def correct(self, draft, verdict):
        return verdict

    def commit(self, draft, verdict):
        new = draft.items[0, : int(verdict.num_accepted)].tolist() + [int(verdict.next_item)]
        self.out.extend(new)
        self.active[0] = not self.finished
        return [new]


def run(wrong, n, schedule):
    verifier, stats = ToyVerifier(n), SpecStats()
    drafter = ToyDrafter(wrong, verifier.out)
    accept = lambda draft, target: greedy_match(target, draft.items, draft.lengths)  # noqa: E731
    steps = list(speculate(drafter, verifier, accept, schedule, stats))
    return steps, verifier.out, stats


def test_perfect_drafter_emits_k_plus_one_per_target_call():
    steps, out, stats = run(wrong=[], n=20, schedule=ConstantSchedule(4))
    assert out == TRUTH[:20]
    assert [s.k for s in steps] == [4, 4, 4, 4]  # 5 + 5 + 5 + 5 = 20
    assert stats.target_calls == 4 and stats.acceptance_rate == 1.0
    assert stats.items_per_target_call == 5.0
    assert stats.estimated_call_speedup == 5.0


def test_wrong_drafts_are_corrected_and_stats_add_up():
    steps, out, stats = run(wrong=[2, 3, 11], n=17, schedule=ConstantSchedule(3))
    assert out == TRUTH[:17]
    assert stats.rounds == len(steps)
    assert stats.emitted == 17 == sum(len(s.emitted[0]) for s in steps)
    assert stats.drafted == sum(s.k for s in steps)
    assert stats.accepted == sum(int(s.verdict.num_accepted) for s in steps)
    assert stats.accepted <= stats.drafted
    assert sum(stats.accepted_length_hist) == stats.rounds
    assert sum(n * c for n, c in enumerate(stats.accepted_length_hist)) == stats.accepted
    assert sum(stats.position_drafted) == stats.drafted
    assert sum(stats.position_accepted) == stats.accepted
    # every round emits its accepted drafts plus one correction
    assert stats.emitted == stats.accepted + stats.rounds
    assert stats.time_total >= stats.time_draft + stats.time_verify + stats.time_correct - 1e-6
    d = stats.to_dict()
    assert d["acceptance_rate"] == stats.accepted / stats.drafted


def test_heuristic_schedule_adapts_inside_the_loop():
    steps, out, _ = run(wrong=[9], n=40, schedule=HeuristicSchedule(2, k_max=8))
    assert out == TRUTH[:40]
    ks = [s.k for s in steps]
    assert ks[:3] == [2, 4, 6]  # all accepted: +2 each round (positions 0-2, 3-7, 8 ...)
    assert ks[3] == 5  # position 9 was wrong in round 3: -1
