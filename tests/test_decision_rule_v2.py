"""Issue 64: the decision rule v2 — alpha spending over adaptive looks, the three states read from the interval,
the family-wise error under the global null, and re-judging a saved study without training."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mtbio.reporting.spending import look_weights
from mtbio.reporting.verdicts import (DECIDED, HURTS, IMPROVES, NO_EFFECT, UNDECIDED, Rule, compare, correct,
                                      look_p_values, sequential_p, simulate_sequential, verdict_text)


def _t2_upper(t: float) -> float:
    """P(T ≥ t) for Student's t with 2 degrees of freedom, in closed form."""
    return (1 - t / math.sqrt(t * t + 2)) / 2


def _cells(*rows: list[float]) -> dict:
    return {f"e{i}": compare({s: v for s, v in enumerate(deltas)}, {s: 0.0 for s in range(len(deltas))})
            for i, deltas in enumerate(rows)}


def test_spending_weights_match_the_lan_demets_formulas_by_hand() -> None:
    pocock = look_weights(3, 8, "pocock", 0.05)
    # ln(1 + (e − 1)·t) at t = 3/8, then its increments
    assert pocock[3] == pytest.approx(math.log(1 + (math.e - 1) * 3 / 8))
    assert pocock[8] == pytest.approx(1 - math.log(1 + (math.e - 1) * 7 / 8))
    assert sum(pocock.values()) == pytest.approx(1.0)
    obf = look_weights(3, 8, "obrien-fleming", 0.05)
    # 2 − 2Φ(1.959964 / √(3/8)) = 2 − 2Φ(3.20058) = 0.0013714, a 0.0274 share of 0.05
    assert obf[3] == pytest.approx(0.0013714 / 0.05, rel=1e-3)
    assert obf[3] < obf[4] < obf[8] and sum(obf.values()) == pytest.approx(1.0)
    assert look_weights(5, 5, "obrien-fleming", 0.05) == {5: 1.0}  # a fixed design: one look, all of alpha


def test_the_look_p_values_match_hand_computed_t_tails() -> None:
    beyond, inside = look_p_values([0.03, 0.05, 0.04], 0.01)
    t = (0.04 - 0.01) / (0.01 / math.sqrt(3))  # mean 0.04, sd 0.01: the interval's distance above +1 point
    assert beyond[-1] == pytest.approx(2 * _t2_upper(t)) and inside[-1] == 1.0
    beyond, inside = look_p_values([0.001, -0.001, 0.0], 0.01)
    t = 0.01 / (0.001 / math.sqrt(3))  # mean 0: the distance to either end of ±1 point
    assert inside[-1] == pytest.approx(2 * _t2_upper(t)) and beyond[-1] == 1.0
    assert look_p_values([0.02, 0.02, 0.02], 0.01)[0][-1] == 0.0  # no spread, beyond the threshold


def test_three_states_come_from_the_interval_not_the_point_estimate() -> None:
    cells = _cells([0.10, 0.12, 0.11], [0.001, -0.001, 0.0], [0.02, -0.01, 0.05], [-0.10, -0.11, -0.12])
    correct(cells, Rule())
    green, flat, wide, red = (cells[f"e{i}"] for i in range(4))
    assert green["verdict"] == IMPROVES and green["state"] == DECIDED and green["ci"][0] > 0.01
    assert flat["verdict"] == NO_EFFECT and flat["state"] == DECIDED and -0.01 < flat["ci"][0] < flat["ci"][1] < 0.01
    assert verdict_text(wide) == "undecided" and wide["state"] == UNDECIDED
    assert red["verdict"] == HURTS and red["ci"][1] < -0.01
    # Holm over the four, by hand: green and red tie for the smallest p (mean ±0.11, sd 0.01), so both get 4·p;
    # the interval shown is green's at the level Holm gave its rank, 1 − 0.05/4
    p = 2 * _t2_upper((0.11 - 0.01) / (0.01 / math.sqrt(3)))
    assert green["p_adjusted"] == pytest.approx(4 * p) and red["p_adjusted"] == pytest.approx(4 * p)
    assert green["ci_level"] in (pytest.approx(1 - 0.05 / 4), pytest.approx(1 - 0.05 / 3))
    level = green["ci_level"]
    half = 0.01 / math.sqrt(3) * level * math.sqrt(2 / (1 - level ** 2))  # the 2-df t quantile, closed form
    assert green["ci"] == pytest.approx([0.11 - half, 0.11 + half])


def test_v1_colours_a_point_estimate_the_interval_does_not_support() -> None:
    deltas = [0.010, 0.020, 0.013, 0.017, 0.008, 0.022]  # mean 1.5 points: above the threshold, the interval not
    v1, v2 = _cells(deltas), _cells(deltas)
    correct(v1, Rule(version="v1"))
    correct(v2, Rule())
    assert v1["e0"]["verdict"] == IMPROVES
    assert v2["e0"]["state"] == UNDECIDED and v2["e0"]["ci"][0] < 0.01 < v2["e0"]["ci"][1]


def test_the_threshold_is_the_metrics_own() -> None:
    better = {s: 1.0 - 0.03 * (s + 1) for s in range(3)}  # mse 0.03–0.09 lower: under mse's 0.05 threshold
    cells = {"mse": compare(better, {s: 1.0 for s in range(3)}, "mse")}
    correct(cells, Rule())
    assert cells["mse"]["min_delta"] == 0.05 and cells["mse"]["delta"] == pytest.approx(0.06)
    assert cells["mse"]["state"] == UNDECIDED  # the interval reaches below +0.05
    assert correct(_cells([0.3, 0.31, 0.32]), Rule(min_delta=0.5))["m"] == 1  # --min-delta replaces it


def test_the_calibrated_sequential_p_is_uniform_under_the_null() -> None:
    """An independent simulation (other paths than the calibration's): a single null comparison looked at 3…8
    seeds and stopped at its first rejection is rejected at 5% about 5% of the time, not more."""
    rule = Rule(looks=(3, 8))
    rng = np.random.default_rng(123)
    rejected = sum(sequential_p(list(rng.normal(0, 1, 8)), 0.0, rule)["beyond"][0] < 0.05 for _ in range(3000))
    assert rejected / 3000 == pytest.approx(0.05, abs=0.015)  # ± 3.5 Monte Carlo standard errors


def test_adaptive_seeds_keep_the_family_wise_error_under_alpha() -> None:
    """12 null edges, sd 2 points, 3 → 8 seeds: v1 errs in far more graphs than v2, which stays under 5%."""
    v1 = simulate_sequential(0.02, max_seeds=8, rule=Rule(version="v1"), runs=150, seed=3)
    v2 = simulate_sequential(0.02, max_seeds=8, rule=Rule(), runs=150, seed=3)
    assert v2["family_wise_error"] <= 0.05 < v1["family_wise_error"]
    power = simulate_sequential(0.005, max_seeds=8, runs=60, seed=3, true_delta=0.02, true_edges=1)
    assert power["power"] > 0.3  # a true 2-point gain with sd 0.5 point is found


def test_report_rejudges_a_saved_study_under_either_rule(tmp_path: Path) -> None:
    """`mtbio report DIR --rule`: a saved STILT matrix judged again from its per-seed scores, without training."""
    from click.testing import CliRunner

    from mtbio import cli
    from mtbio.reporting.relations import build_stilt, write_stilt

    seeds = [42, 43, 44, 45, 46, 47]
    base = {"t": {s: 0.5 for s in seeds}}
    moved = {("i", "t"): {s: 0.5 + d for s, d in zip(seeds, [0.010, 0.020, 0.013, 0.017, 0.008, 0.022])}}
    write_stilt(tmp_path, build_stilt({"t": "accuracy"}, ["i"], base, moved, Rule(version="v1")))
    assert json.loads((tmp_path / "stilt.json").read_text())["targets"][0]["intermediate"]["i"]["verdict"] == IMPROVES
    result = CliRunner().invoke(cli.main, ["report", str(tmp_path), "--rule", "v2", "--in-place"])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "stilt.json").read_text())
    cell = saved["targets"][0]["intermediate"]["i"]
    assert saved["decision_rule"]["version"] == "v2" and cell["state"] == UNDECIDED and "undecided" in result.output
    result = CliRunner().invoke(cli.main, ["report", str(tmp_path), "--rule", "v1", "--in-place"])
    assert json.loads((tmp_path / "stilt.json").read_text())["targets"][0]["intermediate"]["i"]["verdict"] == IMPROVES
