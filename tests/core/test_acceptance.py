import torch

from specvideo.core.acceptance import greedy_match, rejection_sample, sample_categorical, threshold_accept


def lengths(*values):
    return torch.tensor(values)


def test_greedy_all_accepted_gives_bonus_token():
    target = torch.tensor([[5, 6, 7, 9]])  # argmax at k = 3 drafted positions + bonus
    verdict = greedy_match(target, torch.tensor([[5, 6, 7]]), lengths(3))
    assert verdict.num_accepted.tolist() == [3]
    assert verdict.next_item.tolist() == [9]


def test_greedy_first_rejected_gives_target_token():
    target = torch.tensor([[4, 6, 7, 9]])
    verdict = greedy_match(target, torch.tensor([[5, 6, 7]]), lengths(3))
    assert verdict.num_accepted.tolist() == [0]
    assert verdict.next_item.tolist() == [4]


def test_greedy_mismatch_in_the_middle_stops_the_prefix():
    target = torch.tensor([[5, 1, 7, 9], [5, 6, 7, 8]])
    verdict = greedy_match(target, torch.tensor([[5, 6, 7], [5, 6, 7]]), lengths(3, 2))
    # row 0 stops at position 1 even though position 2 matches; row 1 only drafted 2 tokens
    assert verdict.num_accepted.tolist() == [1, 2]
    assert verdict.next_item.tolist() == [1, 7]


def test_greedy_with_empty_draft_is_a_plain_target_step():
    verdict = greedy_match(torch.tensor([[3]]), torch.zeros(1, 0, dtype=torch.long), lengths(0))
    assert verdict.num_accepted.tolist() == [0] and verdict.next_item.tolist() == [3]


def one_hot(index, V=4):
    x = torch.zeros(V)
    x[index] = 1.0
    return x


def test_rejection_sample_accepts_all_when_p_equals_q_and_draws_bonus_from_p():
    q = torch.softmax(torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0)), -1)
    p = torch.cat([q, one_hot(2)[None, None]], dim=1)  # bonus position is certain: token 2
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        verdict = rejection_sample(p, q, torch.tensor([[0, 1, 3]]), lengths(3), g)
        assert verdict.num_accepted.tolist() == [3]
        assert verdict.next_item.tolist() == [2]


def test_rejection_sample_rejects_token_with_zero_target_probability_and_samples_residual():
    p = torch.stack([one_hot(1), one_hot(3)])[None]  # (1, 2, 4): target is certain of token 1
    q = torch.stack([one_hot(0)])[None]  # draft proposed token 0 with certainty
    verdict = rejection_sample(p, q, torch.tensor([[0]]), lengths(1), torch.Generator().manual_seed(0))
    assert verdict.num_accepted.tolist() == [0]
    assert verdict.next_item.tolist() == [1]  # normalize(max(0, p - q)) = one-hot(1)


def test_rejection_sample_residual_excludes_what_the_draft_overweights():
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.25] * 4]])
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]])
    g = torch.Generator().manual_seed(0)
    nexts = [rejection_sample(p, q, torch.tensor([[0]]), lengths(1), g) for _ in range(400)]
    rejected = [v.next_item.item() for v in nexts if v.num_accepted.item() == 0]
    assert 150 < len(rejected) < 250  # accept probability min(1, 0.5 / 1.0) = 0.5
    assert set(rejected) == {1}  # residual max(0, p - q) is all on token 1


def test_rejection_sample_with_deterministic_drafter_accepts_with_probability_p():
    p = torch.tensor([[[0.3, 0.7, 0.0], [0.0, 0.0, 1.0]]])
    g = torch.Generator().manual_seed(0)
    accepted = sum(
        rejection_sample(p, None, torch.tensor([[1]]), lengths(1), g).num_accepted.item() for _ in range(1000)
    )
    assert 650 < accepted < 750


def test_rejection_sample_never_accepts_padding_positions():
    p = torch.full((2, 3, 4), 0.25)
    q = torch.full((2, 2, 4), 0.25)
    verdict = rejection_sample(
        p, q, torch.zeros(2, 2, dtype=torch.long), lengths(2, 0), torch.Generator().manual_seed(0)
    )
    assert verdict.num_accepted.tolist() == [2, 0]


def test_threshold_accept_longest_prefix():
    scores = torch.tensor([[0.9, 0.95, 0.5, 0.99], [0.2, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0.9]])
    verdict = threshold_accept(scores, 0.8, lengths(4, 4, 3))
    assert verdict.num_accepted.tolist() == [2, 0, 3]
    assert verdict.next_item is None


def test_sample_categorical_matches_probabilities_and_skips_zero_mass():
    probs = torch.tensor([0.0, 0.2, 0.0, 0.8, 0.0]).repeat(20000, 1)
    draws = sample_categorical(probs, torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=5)
    assert counts[0] == counts[2] == counts[4] == 0
    assert abs(counts[3].item() / 20000 - 0.8) < 0.01
