"""Judging a predicted task graph within each target (issue 31, item 1), against hand-computed values."""
from __future__ import annotations

import math

import pytest

from mtbio.reporting.prediction_quality import (
    is_symmetric,
    ndcg_at,
    per_target,
    permutation_p,
    regret_at,
    within_target_ceiling,
    within_target_summary,
)

TASKS = ["a", "b", "c", "d"]


def graph(values: dict[str, dict[str, float]]) -> dict[tuple[str, str], float]:
    """{target: {source: value}} → {(source, target): value}."""
    return {(s, t): v for t, row in values.items() for s, v in row.items()}


def test_ndcg_and_regret_by_hand() -> None:
    measured, predicted = [0.5, 0.2, 0.0], [2.0, 3.0, 1.0]  # the prediction puts the second partner first
    dcg = 0.2 / math.log2(2) + 0.5 / math.log2(3)
    ideal = 0.5 / math.log2(2) + 0.2 / math.log2(3)
    assert ndcg_at(2, predicted, measured) == pytest.approx(dcg / ideal)
    assert ndcg_at(1, predicted, measured) == pytest.approx(0.2 / 0.5)
    assert regret_at(1, predicted, measured) == pytest.approx(0.3)
    assert regret_at(2, predicted, measured) == pytest.approx(0.0)


def test_tied_predictions_count_as_a_random_order() -> None:
    """A constant predictor scores what a random pick scores, whatever order the partners are listed in."""
    measured, constant = [0.5, 0.2, 0.0], [1.0, 1.0, 1.0]
    assert regret_at(1, constant, measured) == pytest.approx((0.0 + 0.3 + 0.5) / 3)
    assert regret_at(2, constant, measured) == pytest.approx((0.0 + 0.0 + 0.3) / 3)  # pairs {0,1} {0,2} {1,2}
    assert ndcg_at(1, constant, measured) == pytest.approx((0.5 + 0.2 + 0.0) / 3 / 0.5)
    # two tied at the top, the third last: the top place holds the mean of the tied two's gains
    assert ndcg_at(1, [2.0, 2.0, 1.0], measured) == pytest.approx(0.35 / 0.5)
    found = per_target(graph({"a": {"b": 1.0, "c": 1.0, "d": 1.0}}), graph({"a": {"b": 0.3, "c": 0.2, "d": 0.1}}),
                       TASKS)
    assert found["a"]["top1"] == pytest.approx(1 / 3) and found["a"]["spearman"] == 0.0


def test_per_target_figures_and_top1_against_chance() -> None:
    measured = graph({"a": {"b": 0.3, "c": 0.2, "d": 0.1}, "b": {"a": 0.3, "c": 0.2, "d": 0.1}})
    predicted = graph({"a": {"b": 3, "c": 2, "d": 1}, "b": {"a": 1, "c": 2, "d": 3}})
    found = per_target(predicted, measured, TASKS)
    assert set(found) == {"a", "b"}  # c and d have no partners here
    assert found["a"]["spearman"] == pytest.approx(1.0) and found["a"]["top1"] == 1.0
    assert found["b"]["spearman"] == pytest.approx(-1.0) and found["b"]["top1"] == 0.0
    assert found["b"]["chance_top1"] == pytest.approx(1 / 3)
    assert found["b"]["regret@1"] == pytest.approx(0.2) and found["b"]["ndcg@1"] == pytest.approx(0.0)


def test_the_exact_permutation_p() -> None:
    measured = graph({"a": {"b": 0.3, "c": 0.2, "d": 0.1}, "b": {"a": 0.3, "c": 0.2, "d": 0.1}})
    perfect = graph({"a": {"b": 3, "c": 2, "d": 1}, "b": {"a": 3, "c": 2, "d": 1}})
    p, exact = permutation_p(perfect, measured, TASKS)
    # 3! × 3! arrangements; two-sided: the observed mean +1 and its mirror −1 are as far from 0
    assert exact and p == pytest.approx(2 / 36)
    assert permutation_p(perfect, measured, TASKS, two_sided=False)[0] == pytest.approx(1 / 36)  # as high: one
    reversed_ = graph({"a": {"b": 1, "c": 2, "d": 3}, "b": {"a": 1, "c": 2, "d": 3}})
    assert permutation_p(reversed_, measured, TASKS, two_sided=False)[0] == pytest.approx(1.0)
    assert permutation_p(reversed_, measured, TASKS)[0] == pytest.approx(2 / 36)


def test_the_sampled_permutation_p_agrees_with_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import mtbio.reporting.prediction_quality as quality

    measured = graph({"a": {"b": 0.3, "c": 0.2, "d": 0.1}, "b": {"a": 0.3, "c": 0.2, "d": 0.1},
                      "c": {"a": 0.1, "b": 0.3, "d": 0.2}})
    predicted = graph({"a": {"b": 3, "c": 2, "d": 1}, "b": {"a": 2, "c": 3, "d": 1}, "c": {"a": 1, "b": 2, "d": 3}})
    exact, is_exact = permutation_p(predicted, measured, TASKS)
    monkeypatch.setattr(quality, "TABLE_LIMIT", 1)
    monkeypatch.setattr(quality, "PERMUTATIONS", 4000)
    sampled, sampled_exact = permutation_p(predicted, measured, TASKS)
    assert is_exact and not sampled_exact
    assert sampled == pytest.approx(exact, abs=0.025)  # 4,000 draws: sd of the estimate about 0.005


def test_the_within_target_noise_ceiling() -> None:
    same = {("b", "a"): {"1": 0.3, "2": 0.3}, ("c", "a"): {"1": 0.2, "2": 0.2}, ("d", "a"): {"1": 0.1, "2": 0.1}}
    assert within_target_ceiling(same, TASKS) == {"seeds": 2, "r1": 1.0, "reliability": 1.0, "ceiling": 1.0}
    half = {("b", "a"): {"1": 0.3, "2": 0.2}, ("c", "a"): {"1": 0.2, "2": 0.1}, ("d", "a"): {"1": 0.1, "2": 0.3},
            ("a", "b"): {"1": 0.3, "2": 0.3}, ("c", "b"): {"1": 0.2, "2": 0.2}, ("d", "b"): {"1": 0.1, "2": 0.1}}
    found = within_target_ceiling(half, TASKS)  # target a: Spearman −0.5, target b: +1 → r1 0.25
    assert found["r1"] == pytest.approx(0.25)
    assert found["reliability"] == pytest.approx(2 * 0.25 / 1.25)
    assert found["ceiling"] == pytest.approx(math.sqrt(0.4))


def test_the_summary_marks_a_symmetric_predictor_and_its_share_of_the_ceiling() -> None:
    measured = graph({t: {s: float(ord(s) - ord(t)) for s in TASKS if s != t} for t in TASKS})
    symmetric = graph({t: {s: -abs(ord(s) - ord(t)) for s in TASKS if s != t} for t in TASKS})
    assert is_symmetric(symmetric) and not is_symmetric(measured)
    summary = within_target_summary(measured, measured, TASKS, {"ceiling": 0.5})
    assert summary["targets"] == 4 and summary["spearman"] == pytest.approx(1.0)
    assert summary["fraction_of_ceiling"] == pytest.approx(2.0) and not summary["symmetric"]
    assert within_target_summary(symmetric, measured, TASKS, {"ceiling": None})["symmetric"]
