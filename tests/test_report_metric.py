"""`mtbio report --metric TASK=METRIC`: a task scored by another saved metric, in rows and summaries."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtbio import cli
from mtbio.errors import MtbioError
from mtbio.reporting.tables import build_report

# (task, metric, category) as the runs save them in tasks/<task>.yml
TASKS = {"ddi": ("micro_f1", "relation"), "chemprot": ("micro_f1", "relation")}
# seed → task → saved dev scores
SCORES = {
    42: {"ddi": {"micro_f1": 0.50, "macro_f1": 0.30}, "chemprot": {"micro_f1": 0.80, "macro_f1": 0.60}},
    43: {"ddi": {"micro_f1": 0.40, "macro_f1": 0.20}, "chemprot": {"micro_f1": 0.90, "macro_f1": 0.70}},
}


def _runs(root: Path, shift: dict[int, float] | None = None) -> Path:
    """One column of seed runs; shift[s] moves every score of seed s."""
    for seed, scores in SCORES.items():
        run = root / f"seed-{seed}"
        (run / "tasks").mkdir(parents=True)
        moved = {t: {m: v + (shift or {}).get(seed, 0.0) for m, v in s.items()} for t, s in scores.items()}
        (run / "results.json").write_text(json.dumps({"dev": moved}))
        (run / "config.yaml").write_text(yaml.safe_dump({"seed": seed}))
        for task, (metric, category) in TASKS.items():
            (run / "tasks" / f"{task}.yml").write_text(yaml.safe_dump({"name": task, "metric": metric,
                                                                       "category": category}))
    return root


def test_metric_override_changes_the_row_and_the_averages_but_leaves_blurb(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    plain = build_report([runs])
    chosen = build_report([runs], metrics={"ddi": "macro_f1"})
    rows = {r["task"]: r for r in chosen["rows"]}
    assert rows["ddi"]["metric"] == "macro_f1"
    assert rows["ddi"]["cells"][0]["mean"] == pytest.approx(0.25)          # (0.30 + 0.20) / 2
    assert rows["chemprot"]["cells"][0]["mean"] == pytest.approx(0.85)     # primary metric kept
    # plain/BLUE average per seed: (0.30+0.80)/2 = 0.55 and (0.20+0.90)/2 = 0.55
    assert chosen["summaries"]["average"][0]["mean"] == pytest.approx(0.55)
    assert plain["summaries"]["average"][0]["mean"] == pytest.approx((0.65 + 0.65) / 2)
    # BLURB scores DDI by micro F1 only: with DDI overridden, the BLURB score is ChemProt's alone, DDI listed missing
    blurb = chosen["summaries"]["blurb"][0]
    assert blurb["mean"] == pytest.approx(0.85)
    assert "ddi" in blurb["missing"] and blurb["tasks"] == ["chemprot"]


def test_metric_override_in_the_cli_table_and_its_errors(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    result = CliRunner().invoke(cli.main, ["report", str(runs), "--metric", "ddi=macro_f1"])
    assert result.exit_code == 0, result.output
    assert "| ddi (macro_f1, post hoc (declared: micro_f1)) | 25.00 ± 7.07 |" in result.output
    assert "ddi is scored by macro_f1 here" in result.output
    bad = CliRunner().invoke(cli.main, ["report", str(runs), "--metric", "ddi"])
    assert bad.exit_code != 0 and "expected TASK=METRIC" in bad.output
    with pytest.raises(MtbioError, match="lack the metric 'accuracy' \\(saved: macro_f1, micro_f1\\)"):
        build_report([runs], metrics={"ddi": "accuracy"})
    with pytest.raises(MtbioError, match="--metric names hoc"):
        build_report([runs], metrics={"hoc": "macro_f1"})


def test_compare_each_tests_every_column_against_the_baseline(tmp_path: Path) -> None:
    """Remedies against standard fine-tuning: one Δ column per remedy, each by hand from the per-seed scores."""
    base = _runs(tmp_path / "standard")
    up = _runs(tmp_path / "up", {42: 0.03, 43: 0.05})        # Δ 3 and 5 points: mean 4, sd √2
    down = _runs(tmp_path / "down", {42: -0.10, 43: -0.10})  # Δ −10 on both seeds: sd 0, a sure 'hurts'
    report = build_report([base, up, down], labels=["standard", "up", "down"], compare_to="standard", compare_each=True)
    ddi = next(r for r in report["rows"] if r["task"] == "ddi")
    assert ddi["verdicts"]["up"]["delta"] == pytest.approx(0.04)
    assert ddi["verdicts"]["up"]["sd"] == pytest.approx(0.02 ** 0.5 / 10)
    # two seeds: the same −10 on both, and still no verdict (a verdict needs 3 seeds)
    assert ddi["verdicts"]["down"]["verdict"] == "no verdict" and ddi["verdict"] == ddi["verdicts"]["down"]
    assert ddi["verdicts"]["down"]["withheld"] == "2 seeds: a verdict needs at least 3"
    result = CliRunner().invoke(cli.main, ["report", str(base), str(up), str(down), "--label", "standard", "--label", "up",
                                           "--label", "down", "--compare-to", "standard", "--compare-each",
                                           "--csv", str(tmp_path / "t.csv")])
    assert result.exit_code == 0, result.output
    assert "| Δ up − standard (verdict) | Δ down − standard (verdict) |" in result.output
    assert ("| +4.00 [-8.71, +16.71] (no verdict (2 seeds: a verdict needs at least 3), p=0.156) | "
            "-10.00 [-10.00, -10.00] (no verdict (2 seeds: a verdict needs at least 3), p=0.000) |"
            ) in result.output  # rule v2: a withheld comparison is not in the family
    header = (tmp_path / "t.csv").read_text().splitlines()[0]
    assert header.endswith(("up delta,up delta sd,up p value,up adjusted p,up verdict,down delta,down delta sd,down p value,"
                            "down adjusted p,down verdict"))
    without = CliRunner().invoke(cli.main, ["report", str(base), "--compare-each"])
    assert without.exit_code != 0 and "--compare-each needs --compare-to" in without.output


def test_a_cell_at_its_trivial_score_is_marked_not_learned(tmp_path: Path) -> None:
    """Means 0.45 (ddi) and 0.85 (chemprot): against trivial scores 0.445 and 0.50, only ddi is within a point."""
    from mtbio.reporting.tables import to_markdown

    text = to_markdown(build_report([_runs(tmp_path / "runs")], trivial={"ddi": 0.445, "chemprot": 0.50}))
    assert "| ddi (micro_f1) | 44.50 | 45.00 ± 7.07 ‡ |" in text
    assert "| chemprot (micro_f1) | 50.00 | 85.00 ± 7.07 |" in text
    assert "‡ less than 1 point above the trivial score" in text
    assert "‡" not in to_markdown(build_report([_runs(tmp_path / "again")], trivial={"ddi": 0.40, "chemprot": 0.5}))
