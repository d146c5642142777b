"""Faults round three (issue 91), the verdict rows: G6 (a committed study's JSON says "no effect" where its state is
undecided or withheld), G8 (`mtbio report DIR --rule v1` rewrote the study's files) and G13 (a score 15 points below
its trivial score called "within a point" of it). Nothing is trained."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mtbio.cli import main
from mtbio.reporting.relations import build_relations, build_stilt, report_relations, write_relations, write_stilt
from mtbio.reporting.transfer import build_transfer, format_transfer
from mtbio.reporting.verdicts import IMPROVES, UNDECIDED, Rule, compare, correct, verdict_word

REPO = Path(__file__).resolve().parents[1]
SEEDS = [42, 43, 44, 45, 46, 47]


# ---- G6: the verdict word in every file comes from the one renderer ------------------------------------------------

def test_g6_an_undecided_or_withheld_comparison_is_not_saved_as_no_effect() -> None:
    cells = {"wide": compare({0: 0.02, 1: -0.01, 2: 0.05}, {0: 0.0, 1: 0.0, 2: 0.0}),
             "held": compare({0: 0.5, 1: 0.5, 2: 0.5}, {0: 0.5, 1: 0.5, 2: 0.5}),
             "two": compare({0: 0.1, 1: 0.2}, {0: 0.0, 1: 0.0})}
    cells["held"]["withheld"] = "t: not learned alone nor with the partner"
    correct(cells, Rule())
    assert cells["wide"]["state"] == UNDECIDED and cells["wide"]["verdict"] == "undecided"
    assert cells["held"]["verdict"] == "no verdict" and cells["two"]["verdict"] == "no verdict"


def test_g6_the_committed_biomedical_graph_says_undecided_where_it_is() -> None:
    relations = json.loads((REPO / "examples" / "pairwise_biomedical" / "relations.json").read_text())
    undecided = [e for e in relations["edges"] if e["state"] == UNDECIDED]
    assert len(undecided) == 12 and all(e["verdict"] == "undecided" for e in undecided)
    assert all(e["verdict"] == verdict_word(e) for e in relations["edges"])
    dot = (REPO / "examples" / "pairwise_biomedical" / "relations.dot").read_text()
    assert 'verdict="no effect"' not in dot and dot.count('verdict="undecided"') == 12


# ---- G8: re-judging under another rule goes to the output, not over the study -------------------------------------

def _stilt(tmp_path: Path) -> Path:
    base = {"t": {s: 0.5 for s in SEEDS}}
    moved = {("i", "t"): {s: 0.5 + d for s, d in zip(SEEDS, [0.010, 0.020, 0.013, 0.017, 0.008, 0.022])}}
    study = tmp_path / "study"
    write_stilt(study, build_stilt({"t": "accuracy"}, ["i"], base, moved, Rule()))
    return study


def test_g8_report_rule_v1_prints_and_leaves_the_studys_files_as_they_were(tmp_path: Path) -> None:
    study = _stilt(tmp_path)
    before = {p.name: p.read_bytes() for p in study.iterdir()}
    result = CliRunner().invoke(main, ["report", str(study), "--rule", "v1"])
    assert result.exit_code == 0, result.output
    assert "improves" in result.output and "written" not in result.output  # v1's verdict, shown only
    assert {p.name: p.read_bytes() for p in study.iterdir()} == before


def test_g8_report_rule_v1_writes_into_output_or_in_place_when_asked(tmp_path: Path) -> None:
    study = _stilt(tmp_path)
    before = (study / "stilt.json").read_bytes()
    out = tmp_path / "v1"
    result = CliRunner().invoke(main, ["report", str(study), "--rule", "v1", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert f"written: {out / 'stilt.json'}" in result.output and (study / "stilt.json").read_bytes() == before
    assert json.loads((out / "stilt.json").read_text())["targets"][0]["intermediate"]["i"]["verdict"] == IMPROVES
    result = CliRunner().invoke(main, ["report", str(study), "--rule", "v1", "--in-place"])
    assert result.exit_code == 0, result.output
    assert json.loads((study / "stilt.json").read_text())["decision_rule"]["version"] == "v1"


# ---- G13: a score well below its trivial score is called below it, by how much ----------------------------------

def test_g13_pairwise_names_a_score_fifteen_points_below_its_trivial_score(tmp_path: Path) -> None:
    relations = build_relations({"a": "accuracy", "b": "accuracy"},
                                {"a": {s: 0.35 for s in SEEDS[:3]}, "b": {s: 0.80 + 0.01 * i for i, s in enumerate(SEEDS[:3])}},
                                {("b", "a"): {s: 0.35 for s in SEEDS[:3]}, ("a", "b"): {s: 0.81 for s in SEEDS[:3]}},
                                trivial={"a": 0.50, "b": 0.40})
    edge = next(e for e in relations["edges"] if e["target"] == "a")
    assert "below its trivial score by 15.0 points" in edge["withheld"] and "within a point" not in edge["withheld"]
    write_relations(tmp_path, relations)
    shown = report_relations(tmp_path)
    assert "not learned alone: a (below its trivial score by 15.0 points)" in shown
    assert "within a point" not in shown


def test_g13_transfer_names_a_score_fifteen_points_below_its_trivial_score() -> None:
    seeds = SEEDS[:3]
    table = build_transfer({"t": "accuracy"}, {"r": ["u"]}, {"t": {"100": 100}},
                           {("t", "100"): {s: 0.35 for s in seeds}}, {("r", "t", "100"): {s: 0.36 for s in seeds}},
                           trivial={"t": 0.50})
    shown = format_transfer(table)
    assert "below its trivial score by 15.0 points (0.5000)" in shown and "within a point" not in shown
