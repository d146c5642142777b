"""Issue 34's smaller things, each as a user meets it: a report that leaves run directories alone,
sweep status lines that keep their timestamps, a curves plot with the trivial score, the kept step and
the learning rate, tracker hyperparameters without sweep-only keys, and one truncation line per split."""
from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.training.config import RunConfig, flat_fields, run_options


def _run_dir(root: Path) -> Path:
    run = root / "run"
    (run / "tasks").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"stage": "finetune", "dev": {"ddi": {"micro_f1": 0.5}},
                                                  "trivial": {"ddi": 0.0}, "best_step": 20}))
    (run / "config.yaml").write_text(yaml.safe_dump({"seed": 42}))
    (run / "tasks" / "ddi.yml").write_text(yaml.safe_dump({"name": "ddi", "metric": "micro_f1", "category": "relation"}))
    records = [{"step": s, "split": "train", "loss": {"ddi": 1.0 / s}, "lr": 1e-4 * s / 40} for s in (10, 20, 30, 40)]
    records += [{"step": s, "split": "dev", "scores": {"ddi": {"micro_f1": 0.1 * s / 10}}} for s in (20, 40)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_report_leaves_the_run_directory_as_it_was(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    before = sorted(p.name for p in run.iterdir())
    result = CliRunner().invoke(main, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in run.iterdir()) == before and "written:" not in result.output
    kept = CliRunner().invoke(main, ["report", str(run), "--csv", str(tmp_path / "table.csv")])
    assert kept.exit_code == 0 and (tmp_path / "table.csv").is_file() and (tmp_path / "table.json").is_file()


def test_curves_show_the_trivial_score_the_kept_step_and_the_learning_rate(tmp_path: Path, monkeypatch) -> None:
    import matplotlib.axes

    run = _run_dir(tmp_path)
    drawn: dict[str, list] = {"axhline": [], "axvline": []}
    for name in drawn:
        original = getattr(matplotlib.axes.Axes, name)
        monkeypatch.setattr(matplotlib.axes.Axes, name,
                            lambda self, value, *a, _o=original, _n=name, **k: (drawn[_n].append(value), _o(self, value, *a, **k))[1])
    result = CliRunner().invoke(main, ["report", str(run), "--curves"])
    assert result.exit_code == 0, result.output
    assert drawn["axhline"] == [0.0] and drawn["axvline"] == [20]  # ddi's trivial score; the kept step
    import matplotlib.image

    image = matplotlib.image.imread(run / "curves.png")
    assert image.shape[1] > 1.3 * image.shape[0]  # three panels side by side


def test_sweep_status_keeps_a_long_lines_timestamp(tmp_path: Path) -> None:
    from mtbio.experiments.sweep import Cell
    from mtbio.experiments.sweep_status import _last_line

    run = tmp_path / "cell"
    run.mkdir()
    (run / "run.log").write_text("2026-11-24 11:18:34 INFO " + "x" * 150 + " the end\n")
    line = _last_line(Cell("baseline", ("ddi",), 42, run, "finetune", 1e-4))
    assert line.startswith("2026-11-24 11:18:34") and line.endswith("the end") and len(line) <= 100


def test_tracker_hyperparameters_are_the_runs_own_options() -> None:
    options = set(run_options())
    assert {"lr", "epochs", "batch_size", "recipe", "max_eval_examples"} <= options
    assert not options & {"seeds", "max_seeds", "launcher", "parallel", "alpha", "prune", "affinity_every", "top"}
    assert options <= set(flat_fields(RunConfig))


def test_each_truncation_count_is_logged_once(tmp_path: Path, tiny_encoder: str, data_dir: Path, caplog) -> None:
    from mtbio.data.pipeline import load_task_split
    from mtbio.model.encoder import load_tokenizer
    from mtbio.tasks.loading import load_catalog

    task = load_catalog().tasks["chemprot"]
    with caplog.at_level(logging.INFO, logger="mtbio"):
        load_task_split(task, "dev", data_dir, load_tokenizer(tiny_encoder), 300, 16)
    lines = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("chemprot/dev: ") and "(max_length 16)" in lines[0]


def test_a_sweep_marks_a_task_not_learned_alone(tmp_path: Path) -> None:
    from mtbio.reporting.relations import build_relations, report_relations, unlearned_tasks, write_relations

    seeds = {42: 0.0, 43: 0.0, 44: 0.0}
    relations = build_relations({"a": "accuracy", "b": "accuracy"},
                                {"a": {s: 0.50 for s in seeds}, "b": {s: 0.80 + 0.01 * i for i, s in enumerate(seeds)}},
                                {("b", "a"): {s: 0.70 for s in seeds}, ("a", "b"): {s: 0.81 for s in seeds}},
                                trivial={"a": 0.50, "b": 0.40})
    assert unlearned_tasks(relations) == ["a"]
    write_relations(tmp_path, relations)
    assert "not learned alone: a (within a point of its trivial score)" in report_relations(tmp_path)


@pytest.mark.parametrize("sweep", ["pairwise_biomedical", "pairwise_clinical_public"])
def test_the_pages_edge_table_is_the_committed_relations(sweep: str) -> None:
    import runpy

    from mtbio.reporting.verdicts import verdict_text

    repo = Path(__file__).resolve().parents[1]
    relations = json.loads((repo / "examples" / sweep / "relations.json").read_text())
    table = runpy.run_path(str(repo / "examples" / "edge_table.py"))["edge_table"](relations)
    rows = table.splitlines()[2:]
    assert len(rows) == len(relations["edges"])
    first = relations["edges"][0]
    assert rows[0].startswith(f"| {first['source']} → {first['target']} | {first['n_seeds']} (")
    assert f"{100 * first['delta']:+.2f}".replace("-", "−") in rows[0] and verdict_text(first) in rows[0]
    page = (repo / "examples" / f"{sweep}.md").read_text()
    assert table in page  # the page shows the table of the committed file


def test_the_learning_rate_schedule_is_transformers_linear_warm_up_and_decay() -> None:
    """mtbio's own LambdaLR (transformers' module costs ~2 s of imports per process) gives the same factors."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from mtbio.training.optim import build_scheduler

    for total, ratio in ((10, 0.1), (7, 0.0), (25, 0.5), (1, 0.1)):
        ours = build_scheduler(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0), total, ratio)
        theirs = get_linear_schedule_with_warmup(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0),
                                                 int(round(total * ratio)), total)
        factors = []
        for _ in range(total + 2):
            factors.append((ours.get_last_lr()[0], theirs.get_last_lr()[0]))
            ours.optimizer.step(), ours.step(), theirs.optimizer.step(), theirs.step()
        assert [a for a, _ in factors] == [b for _, b in factors], (total, ratio)


def test_the_select_pages_tables_are_the_committed_files(data_dir: Path) -> None:
    """examples/select_biomedical.md shows select_summary.py's tables of the committed runs (trivial on test)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    page = (repo / "examples" / "select_biomedical.md").read_text()
    for study in ("select_biomedical", "select_biomedical_steps", "select_biomedical_floor"):
        table = subprocess.run([sys.executable, str(repo / "examples" / "select_summary.py"),
                                str(repo / "examples" / study), "--data-dir", str(data_dir)],
                               capture_output=True, text=True, check=True).stdout
        assert "### ncbi-disease (entity_f1)" in table and "trivial score on test" in table
        assert table.rstrip() in page
    for name in ("table-dev.md", "table-dev-arms.md"):  # the group-training comparison (select_training.sh)
        assert (repo / "examples" / "select_training" / name).read_text().split("\n\ndev split")[0] in page


def test_the_select_summary_shows_the_targets_dev_baselines(tmp_path: Path) -> None:
    """select_summary.py's baselines line: the alone cells' no-training baselines, meaned over seeds; none kept, none shown."""
    import runpy

    dev_baselines = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "select_summary.py"))[
        "dev_baselines"]
    cells = tmp_path / "pairwise" / "baselines" / "mqp"
    for seed, probe in ((42, 0.5), (43, 0.6)):
        (cells / f"seed-{seed}").mkdir(parents=True)
        kept = {"baselines": {"mqp": {"probe": probe, "cosine-mean": 0.8}}}
        (cells / f"seed-{seed}" / "results.json").write_text(json.dumps(kept))
    assert dev_baselines(tmp_path, "mqp") == "; no-training baselines on dev: probe 0.550, cosine-mean 0.800"
    (cells / "seed-43" / "results.json").write_text("{}")
    assert dev_baselines(tmp_path, "mqp") == ""


def test_the_floor_pages_table_and_count_are_the_committed_cells() -> None:
    """examples/small_data_floor.md shows small_data_floor.py's table of the committed cells, and the page and the
    README count those cells."""
    import runpy

    repo = Path(__file__).resolve().parents[1]
    floor = runpy.run_path(str(repo / "examples" / "small_data_floor.py"))
    cells = repo / "examples" / "small_data_floor"
    page = (repo / "examples" / "small_data_floor.md").read_text()
    assert floor["table"](floor["build"](cells)).strip() in page
    plan = subprocess.run(["bash", str(repo / "examples" / "small_data_floor.sh")], env={**os.environ, "PLAN_ONLY": "1"},
                          capture_output=True, text=True, check=True).stdout.splitlines()
    planned = len(plan) * 3 * 2  # three seeds, the two arms of issue 63
    found = floor["read_cells"](cells)
    count = f"{sum(len(seeds) for (arm, *_), seeds in found.items() if arm in ('recipe', 'today'))} of {planned} cells"
    assert f"## Status ({count}" in page and count in (repo / "README.md").read_text()
    points = floor["POINTS88"] + floor["HOLDOUT88"]  # issue 88's arm: its own count and table
    landed = sum(len(seeds) for (arm, *_), seeds in found.items() if arm == "recipe-88")
    assert f"({landed} of {3 * len(points)} recipe-88 cells" in page
    assert floor["table_88"](floor["issue_88"](found)).strip() in page


def test_a_baseline_equal_to_the_trivial_score_is_no_floor_point(tmp_path: Path) -> None:
    """BioASQ at 100: every baseline of every run is the majority-class accuracy, so the point is not a floor point
    under either arm, although the mean of the trivial score over five runs rounds one ulp below the baselines'
    (today's three committed cells, two of them also standing in for recipe cells)."""
    import runpy

    repo = Path(__file__).resolve().parents[1]
    kept = {json.loads(line)["cell"]: json.loads(line)
            for line in (repo / "examples" / "small_data_floor" / "cells.jsonl").read_text().splitlines()}
    (tmp_path / "cells.jsonl").write_text("".join(
        json.dumps({**kept[f"today/bioasq/n-100/seed-{seed}"], "cell": f"{arm}/bioasq/n-100/seed-{seed}"}) + "\n"
        for arm, seeds in (("today", (42, 43, 44)), ("recipe", (42, 43))) for seed in seeds))
    floor = runpy.run_path(str(repo / "examples" / "small_data_floor.py"))
    summary = floor["build"](tmp_path)
    row = summary["rows"][0]
    assert row["best_baseline"] != row["trivial"] and abs(row["best_baseline"] - row["trivial"]) < 1e-12
    assert summary["floor"] == {} and summary["floor_today"] == {} and list(summary["recipe_vs_today"]) == ["bioasq n=100"]


def test_the_floor_table_names_the_points_that_test_the_floor(tmp_path: Path) -> None:
    """A point whose LP-FT start is below its probe on a seed tests the floor; one whose start equals its probe on
    every seed cannot fall below it; a point with another's scores on every seed is counted once; the table shows
    fine-tuning over the start."""
    import runpy

    repo = Path(__file__).resolve().parents[1]
    cells = {"tagger": ((0.30, 0.20, 0.30), (0.5, 0.6, 0.7)), "pair": ((0.40,) * 3, (0.6, 0.61, 0.62)),
             "pair-bi": ((0.40,) * 3, (0.6, 0.61, 0.62))}
    for task, (starts, kept) in cells.items():
        for seed, start, score in zip((42, 43, 44), starts, kept):
            run = tmp_path / "recipe" / task / "n-100" / f"seed-{seed}"
            (run / "tasks").mkdir(parents=True)
            (run / "tasks" / f"{task}.yml").write_text(yaml.safe_dump({"name": task, "metric": "accuracy"}))
            (run / "results.json").write_text(json.dumps({
                "dev": {task: {"accuracy": score}}, "start_scores": {task: {"accuracy": start}}, "steps": 200,
                "trivial": {task: 0.0}, "baselines": {task: {"probe": 0.25 if task == "tagger" else 0.40}}}))
    floor = runpy.run_path(str(repo / "examples" / "small_data_floor.py"))
    summary = floor["build"](tmp_path)
    assert summary["floor_tested"] == {"points": 3, "testing": ["tagger n=100"], "repeats": {"pair-bi n=100": "pair n=100"},
                                       "distinct": 2}
    shown = floor["table"](summary)
    assert "| fine-tuning over its start |" in shown and "| +33.3 (start 26.7) |" in shown  # tagger: 0.6 - 0.267
    assert "8 of" not in shown and "test the floor" in shown and ": 1 of 3 (tagger n=100); on the other 2" in shown
    assert "Distinct recipe results among the 3: 2 (pair-bi n=100 is pair n=100's scores on every seed)." in shown
