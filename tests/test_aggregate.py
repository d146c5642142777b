"""Benchmark aggregates and seed summaries, checked against hand arithmetic."""
from __future__ import annotations

import math

import pytest

from mtbio.errors import MtbioError
from mtbio.evaluation.aggregate import blue_average, blurb_score, mean_sd, missing_tasks

SCORES = {"bc5-chem": 0.9, "ncbi": 0.8, "bc2gm": 0.7, "chemprot": 0.6, "biosses": 0.5}
CATEGORIES = {"bc5-chem": "ner", "ncbi": "ner", "bc2gm": "ner", "chemprot": "relation", "biosses": "similarity"}


def test_blue_average_is_plain_mean() -> None:
    # (0.9 + 0.8 + 0.7 + 0.6 + 0.5) / 5 = 3.5 / 5
    assert blue_average(SCORES) == pytest.approx(0.7)


def test_blurb_score_macro_averages_over_categories() -> None:
    # ner = (0.9 + 0.8 + 0.7) / 3 = 0.8; relation = 0.6; similarity = 0.5
    # BLURB = (0.8 + 0.6 + 0.5) / 3 = 1.9 / 3 = 0.6333…, not the plain mean 0.7
    assert blurb_score(SCORES, CATEGORIES) == pytest.approx(1.9 / 3)
    assert blurb_score(SCORES, CATEGORIES) != pytest.approx(blue_average(SCORES))


def test_blurb_score_rejects_non_blurb_or_unknown_category() -> None:
    with pytest.raises(MtbioError, match="mednli"):
        blurb_score({"mednli": 0.8}, {"mednli": "nli"})
    with pytest.raises(MtbioError, match="ddi"):
        blurb_score({"ddi": 0.8}, {})


def test_missing_tasks_tells_partial_from_complete() -> None:
    benchmark = ["bc5-chem", "ncbi", "hoc", "bc5-chem"]
    assert missing_tasks(["ncbi", "bc5-chem"], benchmark) == ["hoc"]
    assert missing_tasks(["hoc", "ncbi", "bc5-chem", "extra"], benchmark) == []


def test_mean_sd_uses_sample_sd() -> None:
    # mean 2.5; squared deviations 2.25 + .25 + .25 + 2.25 = 5; ddof=1 → sqrt(5/3)
    mean, sd = mean_sd([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert sd == pytest.approx(math.sqrt(5 / 3))
    assert mean_sd([0.42]) == (0.42, 0.0)


def test_empty_input_is_an_error() -> None:
    with pytest.raises(MtbioError):
        blue_average({})
    with pytest.raises(MtbioError):
        blurb_score({}, {})
    with pytest.raises(MtbioError):
        mean_sd([])


def test_summaries_cover_only_their_own_benchmark_and_name_what_is_missing() -> None:
    from mtbio.evaluation.aggregate import benchmark_summaries

    scores = {"ddi": 0.8, "chemprot": 0.6, "bc5cdr-chem": 0.9, "ade": 0.5, "mednli": 0.7}
    categories = {"ddi": "relation", "chemprot": "relation", "bc5cdr-chem": "ner", "ade": "relation", "mednli": "nli"}
    blue = ["bc5cdr-chem", "ddi", "chemprot", "mednli", "hoc"]
    blurb = ["bc5cdr-chem", "ddi", "chemprot", "hoc"]
    out = benchmark_summaries(scores, categories, blue, blurb)
    assert out["average"]["value"] == pytest.approx(3.5 / 5)  # every task, plainly
    assert out["blue"]["value"] == pytest.approx((0.9 + 0.8 + 0.6 + 0.7) / 4)  # ade is not a BLUE task
    assert out["blue"]["missing"] == ["hoc"]
    # BLURB: relation = mean(0.8, 0.6) (ade is no BLURB task), ner = 0.9; mednli is not BLURB either
    assert out["blurb"]["value"] == pytest.approx((0.7 + 0.9) / 2)
    assert out["blurb"]["missing"] == ["hoc"]
    assert "blurb" not in benchmark_summaries({"ade": 0.5}, {"ade": "relation"}, blue, blurb)
