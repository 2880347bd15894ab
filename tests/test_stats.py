"""Rank statistics the fidelity benchmark reports: Spearman's rho, its permutation p-value, pairwise accuracy."""
from __future__ import annotations

import itertools

from evaluator.stats import pairwise_accuracy, spearman, spearman_p_value


def test_spearman_uses_average_ranks_for_ties():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert abs(spearman([1, 1, 2, 3], [1, 2, 3, 4]) - 0.9487) < 1e-3
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_exact_p_value_counts_orderings_at_least_as_extreme():
    # n = 5, perfect order: two of the 120 orderings reach |rho| = 1 (this one and its reverse).
    assert spearman_p_value([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == 2 / 120
    # Checked against brute force on a tied, imperfect pair.
    x, y = [1, 2, 2, 3, 5, 4], [2, 1, 3, 4, 6, 5]
    rho = abs(spearman(x, y))
    extreme = sum(abs(spearman(x, list(p))) >= rho - 1e-12 for p in itertools.permutations(y))
    assert spearman_p_value(x, y) == extreme / 720


def test_sampled_p_value_is_small_for_a_strong_ranking_and_large_for_noise():
    n = 12
    assert spearman_p_value(list(range(n)), list(range(n)), permutations=20_000) < 1e-3
    noise = [3, 11, 0, 7, 5, 9, 1, 10, 4, 8, 2, 6]
    assert spearman_p_value(list(range(n)), noise, permutations=20_000) > 0.2
    # Seeded: the same call gives the same figure.
    assert spearman_p_value(list(range(n)), noise, permutations=5_000) == \
        spearman_p_value(list(range(n)), noise, permutations=5_000)


def test_pairwise_accuracy_leaves_out_measurement_ties_and_halves_estimate_ties():
    assert pairwise_accuracy([1, 2, 3], [10, 20, 30]) == (1.0, 3)
    assert pairwise_accuracy([3, 2, 1], [10, 20, 30]) == (0.0, 3)
    assert pairwise_accuracy([1, 1, 3], [10, 20, 30]) == (2.5 / 3, 3)
    # 100 vs 101 is within a 3% tie threshold: only the two pairs with 200 count.
    assert pairwise_accuracy([2, 1, 3], [100, 101, 200], tie=0.03) == (1.0, 2)
    assert pairwise_accuracy([1, 2], [5, 5]) == (None, 0)
