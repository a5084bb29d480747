"""Paired statistics for leaderboards, each against a hand computation or a direct numpy computation."""

import math

import numpy as np
import pytest

from vbench_ray import paired


def test_paired_bootstrap_matches_direct_numpy_of_mean_difference():
    a = np.array([0.9, 0.7, 0.8, 0.4, 0.95, 0.6, 0.5])
    b = np.array([0.8, 0.75, 0.6, 0.4, 0.7, 0.65, 0.3])
    out = paired.paired_bootstrap(a, b, seed=3, n_resamples=500)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, size=(500, 7))
    d = (a - b)[idx].mean(axis=1)
    assert out["diff"] == pytest.approx((0.1 - 0.05 + 0.2 + 0 + 0.25 - 0.05 + 0.2) / 7)
    assert out["ci95"] == pytest.approx(list(np.percentile(d, [2.5, 97.5])))
    assert out["n"] == 7


def test_paired_bootstrap_of_pooled_ratios_resamples_whole_cases():
    # accuracy in percent: per case (points, questions)
    na, da = np.array([300.0, 100, 200, 0]), np.array([3.0, 2, 2, 1])
    nb, db = np.array([100.0, 100, 0, 100]), np.array([3.0, 2, 2, 1])
    out = paired.paired_bootstrap(na, nb, da, db, seed=1, n_resamples=300, confidence=0.9)
    assert out["diff"] == pytest.approx(600 / 8 - 300 / 8)
    idx = np.random.default_rng(1).integers(0, 4, size=(300, 4))
    d = na[idx].sum(1) / da[idx].sum(1) - nb[idx].sum(1) / db[idx].sum(1)
    assert out["ci95"] == pytest.approx(list(np.percentile(d, [5, 95])))


def test_permutation_test_exact_by_hand():
    # differences 1, 2, 3, -1: the sum is 5; of the 16 sign flips, 6 have |sum| >= 5
    # (none, {-1}, {1, -1}, {2, 3}, {1, 2, 3}, all flipped)
    a = np.array([2.0, 3.0, 4.0, 0.0])
    b = np.array([1.0, 1.0, 1.0, 1.0])
    out = paired.paired_permutation(a, b)
    assert out["exact"] and out["stat"] == pytest.approx(1.25)
    assert out["p"] == pytest.approx(6 / 16)


def test_permutation_test_monte_carlo_floor_and_direction():
    rng = np.random.default_rng(0)
    a = rng.random(30) + 1.0
    b = rng.random(30)
    out = paired.paired_permutation(a, b, n_resamples=999)
    assert not out["exact"]
    assert out["p"] == pytest.approx(1 / 1000)  # no swap reaches an effect this large: the (1 + 0)/(1 + R) floor
    assert paired.paired_permutation(b, a, n_resamples=999)["p"] == out["p"]  # two-sided


def test_mcnemar_small_uses_exact_binomial():
    # b = 1 (A right, B wrong), c = 6: P(X <= 1 | 7, 1/2) = (1 + 7) / 128, doubled
    a = [True] * 1 + [False] * 6 + [True] * 5 + [False] * 3
    b = [False] * 1 + [True] * 6 + [True] * 5 + [False] * 3
    out = paired.mcnemar(a, b)
    assert (out["b"], out["c"], out["n_discordant"]) == (1, 6, 7)
    assert out["p_exact"] == pytest.approx(16 / 128)
    assert out["chi2"] == pytest.approx(16 / 7)  # (|1 - 6| - 1)^2 / 7
    assert out["p_chi2"] == pytest.approx(math.erfc(math.sqrt(16 / 7 / 2)))  # chi2(1) survival
    assert out["method"] == "exact" and out["p"] == out["p_exact"]


def test_mcnemar_large_uses_continuity_corrected_chi_square():
    a = [True] * 30 + [False] * 10 + [True] * 50
    b = [False] * 30 + [True] * 10 + [True] * 50
    out = paired.mcnemar(a, b)
    assert out["chi2"] == pytest.approx(19**2 / 40)
    assert out["method"] == "chi2-cc" and out["p"] == pytest.approx(math.erfc(math.sqrt(19**2 / 40 / 2)))
    assert paired.mcnemar([True, False], [True, False])["p"] == 1.0  # no discordant pairs


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06 for the last
    assert paired.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = paired.holm([0.5, None, 0.01])
    assert out[1] is None and out[0] == pytest.approx(0.5) and out[2] == pytest.approx(0.02)
    assert paired.holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_bootstrap_ranks_against_direct_numpy():
    nums = np.array([[1.0, 0.0, 1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]])
    out = paired.bootstrap_ranks(nums, seed=5, n_resamples=400)
    assert out["rank"] == [1, 2, 3]  # means 4/6, 3/6, 2/6
    idx = np.random.default_rng(5).integers(0, 6, size=(400, 6))
    vals = nums[:, idx].mean(axis=2)  # (3, 400)
    ranks = np.empty((400, 3), dtype=int)
    for r in range(400):  # competition ranks by hand: 1 + how many are strictly better
        for m in range(3):
            ranks[r, m] = 1 + int(np.sum(vals[:, r] > vals[m, r]))
    lo = np.percentile(ranks, 2.5, axis=0, method="lower")
    hi = np.percentile(ranks, 97.5, axis=0, method="higher")
    assert out["rank_ci95"] == [[int(a), int(b)] for a, b in zip(lo, hi)]
    assert out["p_best"] == pytest.approx(list(np.mean(ranks == 1, axis=0)))
    # lower is better flips the order
    assert paired.bootstrap_ranks(nums, higher_is_better=False, n_resamples=10)["rank"] == [3, 2, 1]


def test_separated_models_have_point_rank_intervals():
    nums = np.array([[9.0, 9.5, 9.2, 9.9], [5.0, 5.5, 5.1, 4.9], [1.0, 1.2, 0.8, 1.1]])
    assert paired.bootstrap_ranks(nums)["rank_ci95"] == [[1, 1], [2, 2], [3, 3]]


@pytest.mark.parametrize("seed", range(25))
def test_a_model_against_itself_is_never_significant(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    num = rng.random(n) * rng.choice([1.0, 100.0])
    den = rng.integers(1, 6, size=n).astype(float)
    correct = rng.random(n * 3) < rng.random()
    perm = paired.paired_permutation(num, num, den, den, seed=seed, n_resamples=2000)
    assert perm["p"] == 1.0 and perm["stat"] == 0.0
    boot = paired.paired_bootstrap(num, num, den, den, seed=seed, n_resamples=200)
    assert boot["diff"] == 0.0 and (boot["ci95"] is None or boot["ci95"] == [0.0, 0.0])
    assert paired.mcnemar(correct, correct)["p"] == 1.0
    assert all(p == 1.0 for p in paired.holm([perm["p"]] * 3))
