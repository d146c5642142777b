"""Issue 92: rule v3's seven states read from the interval against 0 and ±min_delta, its calibrated p against 0 under
the null, the vectorized simulation against the rule itself, a declared primary comparison, and the committed
studies re-judged under v3."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mtbio.reporting.rule_power import Design, simulate_states
from mtbio.reporting.verdicts import (HIGHER_BEYOND, HIGHER_UNSETTLED, LOWER_WITHIN, NO_EFFECT_BEYOND, UNDECIDED_WORD,
                                      Rule, compare, correct, direction, state_text)

REPO = Path(__file__).resolve().parents[1]


def _t2_upper(t: float) -> float:
    """P(T ≥ t) for Student's t with 2 degrees of freedom, in closed form."""
    return (1 - t / math.sqrt(t * t + 2)) / 2


def _t2_half(level: float, se: float) -> float:
    """Half the two-sided `level` t interval at 2 degrees of freedom, in closed form."""
    return se * level * math.sqrt(2 / (1 - level ** 2))


def _cells(*rows: list[float]) -> dict:
    return {f"e{i}": compare({s: v for s, v in enumerate(deltas)}, {s: 0.0 for s in range(len(deltas))})
            for i, deltas in enumerate(rows)}


def test_v3_states_on_a_hand_made_family() -> None:
    """Five comparisons of 3 seeds, threshold 1 point, Holm over the five for each claim, by hand."""
    cells = _cells([0.10, 0.12, 0.11], [0.001, -0.001, 0.0], [0.02, -0.01, 0.05], [-0.0045, -0.0055, -0.005],
                   [0.03, 0.035, 0.04])
    correct(cells, Rule("v3"))
    beyond, flat, wide, small, unsettled = (cells[f"e{i}"] for i in range(5))
    assert [c["verdict"] for c in cells.values()] == [HIGHER_BEYOND, NO_EFFECT_BEYOND, UNDECIDED_WORD, LOWER_WITHIN,
                                                      HIGHER_UNSETTLED]
    # against 0: e0 (t 19.05) < e3 (t 17.32) < e4 (t 12.12) < e2 < e1, so e3 is second: Holm multiplies it by 4,
    # and keeps it at least e0's 5 × p
    p_first, p_small = (2 * _t2_upper(d / (sd / math.sqrt(3))) for d, sd in ((0.11, 0.01), (0.005, 0.0005)))
    assert small["p_adjusted_zero"] == pytest.approx(max(5 * p_first, 4 * p_small)) and max(5 * p_first, 4 * p_small) < 0.05
    # e3's interval is its direction's, at 1 − 0.05/4: mean −0.5 point, sd 0.05 point
    half = _t2_half(1 - 0.05 / 4, 0.0005 / math.sqrt(3))
    assert small["ci"] == pytest.approx([-0.005 - half, -0.005 + half]) and small["ci"][1] < 0
    assert -0.01 < small["ci"][0]  # and wholly inside the threshold: a real, small loss
    # e4: third against 0 (×3), its interval excludes 0 and reaches past +1 point; beyond it, Holm's ×4 is too much
    half = _t2_half(1 - 0.05 / 3, 0.005 / math.sqrt(3))
    assert unsettled["ci"] == pytest.approx([0.035 - half, 0.035 + half]) and unsettled["ci"][0] > 0
    half = _t2_half(1 - 0.05 / 4, 0.005 / math.sqrt(3))  # its size, at its own level: reaches below +1 point
    assert unsettled["ci_size"] == pytest.approx([0.035 - half, 0.035 + half]) and unsettled["ci_size"][0] < 0.01
    assert unsettled["p_adjusted"] == pytest.approx(4 * 2 * _t2_upper(0.025 / (0.005 / math.sqrt(3))))
    assert unsettled["p_adjusted"] > 0.05 and direction(unsettled) == 1
    assert state_text(small, 100).startswith(f"lower, within the threshold [{100 * small['ci'][0]:+.2f}, "
                                             f"{100 * small['ci'][1]:+.2f}] at 98.8% (its size: [")
    assert direction(flat) == 0 and direction(wide) == 0 and direction(beyond) == 1


def test_v3_calibrated_p_against_zero_is_uniform_under_the_null() -> None:
    """A single null comparison looked at 3…8 seeds (other paths than the calibration's): its calibrated p against 0
    is uniform where a level is read (below 0.2, Kolmogorov–Smirnov), and P(p ≤ a) ≈ a there. Above, p / w reaches 1
    at every look (w < 1), so the top of the range is a point mass at 1: a valid p, conservative there."""
    from scipy.stats import kstest

    rng = np.random.default_rng(2024)
    found = []
    for _ in range(2000):
        cells = _cells(list(rng.normal(0, 1, 8)))
        correct(cells, Rule("v3", looks=(3, 8)))
        found.append(cells["e0"]["p_adjusted_zero"])
    found = np.array(found)
    low = found[found <= 0.2] / 0.2
    assert kstest(low, "uniform").pvalue > 0.01
    for level in (0.01, 0.05, 0.2):  # ± 3.5 Monte Carlo standard errors
        assert np.mean(found <= level) == pytest.approx(level, abs=3.5 * math.sqrt(level * (1 - level) / 2000))


@pytest.mark.parametrize("design", [Design("fixed 8", 8, 8), Design("adaptive 3 -> 8", 3, 8)])
def test_the_vectorized_simulation_gives_the_states_the_rule_gives(design: Design) -> None:
    """simulate_states against `correct` graph by graph (adaptive: one more seed per undecided edge a round)."""
    means = np.array([0.02, 0.0, 0.005, -0.015, 0.0, 0.0])
    runs = 12
    found = simulate_states(means, 0.01, design, runs=runs, seed=5)
    x = np.random.default_rng(5).standard_normal((runs, len(means), design.last)) * 0.01 + means[None, :, None]
    looks = (design.first, design.last) if design.first < design.last else None
    for r in range(runs):
        seeds = [design.first] * len(means)
        while True:
            cells = {str(i): compare(dict(enumerate(x[r, i, :seeds[i]])), {k: 0.0 for k in range(seeds[i])})
                     for i in range(len(means))}
            correct(cells, Rule("v3", looks=looks))
            grow = [i for i in range(len(means)) if cells[str(i)]["state"] == "undecided" and seeds[i] < design.last]
            if not grow:
                break
            for i in grow:
                seeds[i] += 1
        for i in range(len(means)):
            cell = cells[str(i)]
            size = ("beyond" if "more than" in cell["verdict"] else "within" if "within" in cell["verdict"]
                    or cell["verdict"] == NO_EFFECT_BEYOND else "none")
            assert (direction(cell), size, seeds[i]) == (found["direction"][r, i], found["size"][r, i],
                                                         found["seeds"][r, i])


def test_a_primary_comparison_is_judged_alone_at_alpha() -> None:
    """Mean 1.5 points, sd 0.5 over 3 seeds: p 0.029 against 0 passes alone, not with four others under Holm."""
    rows = [[0.01, 0.015, 0.02], [0.0, 0.01, -0.01], [0.01, -0.02, 0.0], [0.0, 0.005, -0.01], [0.02, -0.01, 0.0]]
    secondary, primary = _cells(*rows), _cells(*rows)
    correct(secondary, Rule("v3"))
    family = correct(primary, Rule("v3", primary="e0"))
    assert secondary["e0"]["verdict"] == UNDECIDED_WORD
    assert primary["e0"]["verdict"] == "higher, size not settled" and primary["e0"]["primary"] is True
    assert primary["e0"]["p_adjusted_zero"] == pytest.approx(primary["e0"]["p_value"])  # alone: not adjusted
    assert family["primary"] == "e0" and family["m"] == 4 and "e0" not in family["tests"]
    assert state_text(primary["e0"]).startswith("higher, size not settled (primary) [")
    with pytest.raises(ValueError, match="'e9' is not among"):
        correct(_cells(*rows), Rule("v3", primary="e9"))


def test_rejudge_v3_lists_every_change_on_its_page(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "examples" / "rejudge_v3.py"), "--output",
                           str(tmp_path / "changes.json")], capture_output=True, text=True, cwd=REPO / "examples")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    page = (REPO / "examples" / "rejudge_v3.md").read_text()
    assert len(rows) == 8 and all(row in page for row in rows)
    assert json.loads((tmp_path / "changes.json").read_text())["total"] == {"comparisons": 236, "changed": 8,
                                                                          "to_direction": 8}


# ---- issue 92 item 3: what a design can decide, before its cells --------------------------------------------------

def _reached(output: str) -> float:
    found = re.search(r"higher / lower \(size not settled or more\): true \|Δ\| ≥ ([0-9.]+) points", output)
    assert found, output
    return float(found.group(1)) / 100


def test_pairwise_dry_run_states_the_detectable_effect_a_simulation_confirms(
        tmp_path: Path, keyword_tasks: tuple[str, str]) -> None:
    """3 tasks, 6 edges, 3 seeds, sd 1 point: the printed effect is called higher in about 80% of simulated graphs."""
    from click.testing import CliRunner

    from mtbio.cli import main

    defs, data = keyword_tasks
    result = CliRunner().invoke(main, ["pairwise", "--tasks", "kw-few,kw-all,kw-noise", "--task-defs", defs,
                                       "--data-dir", data, "--output", str(tmp_path / "s"), "--seeds", "3",
                                       "--epochs", "1", "--dry-run", "--sd", "0.01", "--effect", "0.03"])
    assert result.exit_code == 0, result.output
    assert "detectable effects at 3 seeds over 6 comparison(s)" in result.output
    assert re.search(r"a true Δ of \+3\.00 points needs \d+ seeds to be called higher", result.output)
    effect = _reached(result.output)
    found = simulate_states(np.array([effect] + [0.0] * 5), 0.01, Design("fixed 3", 3, 3), runs=3000, seed=11)
    assert 0.77 <= float((found["direction"][:, 0] == 1).mean()) <= 0.88  # Holm's first level is Bonferroni's
    without = CliRunner().invoke(main, ["pairwise", "--tasks", "kw-few,kw-all", "--task-defs", defs, "--data-dir",
                                        data, "--output", str(tmp_path / "t"), "--dry-run"])
    assert "2 comparisons at 3 seeds: give --sd" in without.output


def test_transfer_dry_run_and_report_power_state_the_detectable_effects(
        tmp_path: Path, keyword_tasks: tuple[str, str], micro_encoder: str) -> None:
    from click.testing import CliRunner

    from mtbio.cli import main

    defs, data = keyword_tasks
    result = CliRunner().invoke(main, ["transfer", "--refine-on", "kw-all,kw-noise", "--targets", "kw-few",
                                       "--sizes", "8,16", "--task-defs", defs, "--data-dir", data, "--encoder",
                                       micro_encoder, "--output", str(tmp_path / "t"), "--seeds", "4", "--dry-run",
                                       "--sd", "0.02"])
    assert result.exit_code == 0, result.output
    assert "detectable effects at 4 seeds over 2 comparison(s)" in result.output  # one start, two sizes
    found = simulate_states(np.array([_reached(result.output), 0.0]), 0.02, Design("fixed 4", 4, 4), runs=3000,
                            seed=12)
    assert 0.77 <= float((found["direction"][:, 0] == 1).mean()) <= 0.88
    shown = CliRunner().invoke(main, ["report", "--power", str(REPO / "examples" / "pairwise_biomedical")])
    assert shown.exit_code == 0, shown.output
    assert "detectable effects at 8 seeds over 12 comparison(s)" in shown.output and "the median over" in shown.output


def test_report_judges_a_declared_primary_comparison_alone_and_says_so(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mtbio.cli import main
    from mtbio.reporting.relations import build_stilt, write_stilt

    seeds = [42, 43, 44]
    base = {"t": {s: 0.5 for s in seeds}, "u": {s: 0.5 for s in seeds}}
    moved = {("i", "t"): {s: 0.5 + d for s, d in zip(seeds, [0.01, 0.015, 0.02])},
             **{(name, target): {s: 0.5 + d for s, d in zip(seeds, noise)} for (name, target), noise in
                {("i", "u"): [0.0, 0.01, -0.01], ("j", "t"): [0.01, -0.02, 0.0], ("j", "u"): [0.0, 0.005, -0.01],
                 ("k", "t"): [0.02, -0.01, 0.0]}.items()}}
    write_stilt(tmp_path, build_stilt({"t": "accuracy", "u": "accuracy"}, ["i", "j", "k"], base, moved, Rule("v3")))
    result = CliRunner().invoke(main, ["report", str(tmp_path), "--rule", "v3", "--primary", "i->t"])
    assert result.exit_code == 0, result.output
    assert "primary: i->t, judged alone at alpha; secondary family: holm over 4 tests" in result.output
    assert "i → t: 3 seeds" in result.output and "higher, size not settled (primary), decided" in result.output
