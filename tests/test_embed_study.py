"""The embedding study's tables (examples/embed_table.py) on a hand-made sweep: the declared primary comparison
(mean over the points of start − plain, corrected over the starts) and the checkpoint rule."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mtbio.reporting.transfer import build_transfer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _table_module():
    if str(EXAMPLES) not in sys.path:  # as when run as a script: it imports its sibling transfer_table
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("embed_table", EXAMPLES / "embed_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sweep(gain: dict[int, float], cosine: float) -> dict:
    """Two targets at one size; start `good` gains `gain[seed]` on each, start `same` scatters around nothing."""
    metrics = {"mqp": "accuracy", "ncbi-disease": "entity_f1"}
    sizes = {t: {"100": 100} for t in metrics}
    plain = {(t, "100"): {s: 0.60 + 0.01 * s for s in (42, 43, 44)} for t in metrics}
    refined = {}
    for t in metrics:
        refined[("good", t, "100")] = {s: plain[(t, "100")][s] + gain[s] for s in (42, 43, 44)}
        refined[("same", t, "100")] = {s: plain[(t, "100")][s] + {42: 0.02, 43: -0.03, 44: 0.005}[s] for s in (42, 43, 44)}
    no_training = {"mqp": {"plain": {"100": {"cosine-mean": 0.75, "probe": 0.55}},
                           "good": {"100": {"cosine-mean": cosine}}, "same": {"100": {"cosine-mean": 0.75}}}}
    return build_transfer(metrics, {"good": ["chemprot"], "same": ["ddi"]}, sizes, plain, refined,
                          trivial={"mqp": 0.5, "ncbi-disease": 0.0}, no_training=no_training)


def test_primary_is_each_start_against_plain_over_all_points():
    table = _table_module()
    judged = table.primary(_sweep({42: 0.10, 43: 0.11, 44: 0.12}, cosine=0.75))
    good, same = judged["starts"]["good"], judged["starts"]["same"]
    assert judged["points"] == 2
    assert abs(good["delta"] - 0.11) < 1e-9  # the per-seed means over both points: 0.10, 0.11, 0.12
    assert table.verdict_text(good) == "improves"
    assert table.verdict_text(same) == "undecided"
    # corrected over the two starts alone: the smaller p is multiplied by 2 (Holm's first step)
    assert good["p_adjusted"] <= 1 and same["p_adjusted"] >= good["p_adjusted"]


def test_checkpoint_needs_the_pair_cosine_kept():
    table = _table_module()
    kept = _sweep({42: 0.10, 43: 0.11, 44: 0.12}, cosine=0.74)
    lost = _sweep({42: 0.10, 43: 0.11, 44: 0.12}, cosine=0.70)
    assert table.checkpoint(kept, table.primary(kept))["good"] == "qualifies"
    why = table.checkpoint(lost, table.primary(lost))["good"]
    assert "zero-shot cosine more than 2 points below plain" in why
    assert "primary undecided" in table.checkpoint(kept, table.primary(kept))["same"]
    text = table.render(kept)
    assert "mqp zero-shot cosine (×100) by start and training size: plain 75.0 at 100; good 74.0 at 100" in text


def test_the_sensitivity_check_leaves_a_starts_rerefined_points_out(tmp_path: Path):
    """A start whose ncbi-disease cells ran from a re-refine is judged on mqp alone in the sensitivity check; the
    other start keeps both points; the declared primary is unchanged."""
    import json

    table = _table_module()
    sweep = _sweep({42: 0.10, 43: 0.11, 44: 0.12}, cosine=0.75)
    sweep["targets"][1]["points"][0]["from"]["good"]["per_seed"] = {
        seed: {**cell, "delta": -0.5} for seed, cell in sweep["targets"][1]["points"][0]["from"]["good"]["per_seed"].items()}
    (tmp_path / "starts").mkdir()
    (tmp_path / "starts" / "rerefined.json").write_text(json.dumps({"starts": {
        "good": {"sha256": "x", "cells": ["ncbi-disease/n-100/seed-42"]}, "same": {"sha256": "y", "cells": []}}}))
    leave_out = table.rerefined_points(tmp_path)
    assert leave_out == {"good": {"ncbi-disease@100"}}
    judged = table.primary(sweep, leave_out=leave_out)
    assert judged["points"] == {"good": 1, "same": 2}
    assert abs(judged["starts"]["good"]["delta"] - 0.11) < 1e-9  # mqp alone: 0.10, 0.11, 0.12
    assert abs(table.primary(sweep)["starts"]["good"]["delta"] - (0.11 - 0.5) / 2) < 1e-9
    assert "good leaves out ncbi-disease@100" in table.render(sweep, leave_out)


def test_primary_withheld_until_every_point_is_in():
    table = _table_module()
    sweep = _sweep({42: 0.10, 43: 0.11, 44: 0.12}, cosine=0.75)
    del sweep["targets"][0]["points"][0]["from"]["good"]["per_seed"]["44"]
    del sweep["targets"][0]["points"][0]["from"]["good"]["per_seed"]["43"]
    judged = table.primary(sweep)
    assert "no verdict" in table.verdict_text(judged["starts"]["good"])


def test_the_development_checks_table_judges_the_mean_over_tasks_and_the_warm_cost(tmp_path: Path):
    """examples/small_data_steps.py on two hand-made lane files: Δ per (task, seed), the primary over the tasks'
    mean paired by seed, and the cost ratio over the cells after each task's first."""
    import json
    import sys

    sys.path.insert(0, str(EXAMPLES))
    import small_data_steps

    def cell(seed: int, dev: float, wall: float) -> dict:
        return {"seed": seed, "dev": dev, "wall_seconds": wall, "steps": 200, "best_step": 40, "phases": {}}

    lanes = []
    for i, task in enumerate(["a-devsplit", "b-devsplit"]):
        arms = {"recipe": [cell(s, 0.50 + 0.01 * s - 0.42 + 0.1 * i, 900.0 if s == 42 else 600.0) for s in (42, 43, 44)],
                "candidate": [cell(s, 0.50 + 0.01 * s - 0.42 + 0.1 * i - 0.04, 200.0) for s in (42, 43, 44)]}
        path = tmp_path / f"lane{i}.json"
        path.write_text(json.dumps({"cells": {task: arms}}))
        lanes.append(path)
    text = small_data_steps.render(small_data_steps.load(lanes))
    assert "| a | 43 | 51.0, 200 (40), 600 | 47.0, 200 (40), 200 | -4.0 |" in text
    assert "Primary (mean over the 2 tasks, seeds [42, 43, 44]): Δ -4.00" in text and "hurts" in text
    assert "Cost over the 4 seed pair(s) after each task's first: recipe 600 s, candidate 200 s a cell: ×3.00" in text


def test_a_second_candidate_in_its_own_file_is_judged_against_the_same_recipe_cells(tmp_path: Path):
    """A candidate run later, in its own file, is tabled against the recipe's cells of the lane files; its cost is
    not compared with cells that ran in another process."""
    import json
    import sys

    sys.path.insert(0, str(EXAMPLES))
    import small_data_steps

    def cell(seed: int, dev: float) -> dict:
        return {"seed": seed, "dev": dev, "wall_seconds": 300.0, "steps": 200, "best_step": 40, "phases": {}}

    (tmp_path / "lane.json").write_text(json.dumps({"cells": {"a-devsplit": {
        "recipe": [cell(s, 0.50) for s in (42, 43, 44)], "candidate": [cell(s, 0.45) for s in (42, 43, 44)]}}}))
    (tmp_path / "b16.json").write_text(json.dumps({"cells": {"a-devsplit": {
        "candidate-b16": [cell(42, 0.49), cell(43, 0.505), cell(44, 0.50)]}}}))
    cells = small_data_steps.load([tmp_path / "lane.json", tmp_path / "b16.json"])
    assert small_data_steps.candidates(cells) == ["candidate", "candidate-b16"]
    text = small_data_steps.render(cells, "candidate-b16")
    assert "| a | 43 | 50.0, 200 (40), 300 | 50.5, 200 (40), 300 | +0.5 |" in text
    assert "Primary (mean over the 1 tasks, seeds [42, 43, 44]): Δ -0.17" in text
    assert "no pair of cells ran in one process" in text


def test_an_unfinished_sweep_gets_the_interim_table_of_its_landed_cells(tmp_path: Path, capsys):
    """Before transfer.json: per point and start the seeds landed, mean ± sd, the paired Δ against plain (by hand:
    +5.0 over seeds 42 and 43), the cells' best no-training baseline and the pair target's zero-shot cosine."""
    import json

    (tmp_path / "declared.json").write_text(json.dumps({"primary_metric": {"mqp": "accuracy"}}))
    scores = {("plain", 42): 0.80, ("plain", 43): 0.82, ("from-broad", 42): 0.86, ("from-broad", 43): 0.86,
              ("from-broad", 44): 0.90}
    for (start, seed), score in scores.items():
        cell = tmp_path / "targets" / "mqp" / "n-100" / start / f"seed-{seed}"
        cell.mkdir(parents=True)
        cosine = 0.79 if start == "plain" else 0.75
        (cell / "results.json").write_text(json.dumps({"dev": {"mqp": {"accuracy": score}}, "trivial": {"mqp": 0.5},
                                                       "baselines": {"mqp": {"probe": 0.6, "cosine-mean": cosine}}}))
    (tmp_path / "targets" / "mqp" / "n-100" / "plain" / "seed-44").mkdir()  # a cell under way: not counted
    module = _table_module()
    sys.argv = ["embed_table.py", str(tmp_path)]
    module.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Interim") and "| mqp | 100 | plain | 2 | 81.0 ± 1.4 | – | 79.0 | 79.0 | 50.0 |" in lines
    assert "| mqp | 100 | broad | 3 | 87.3 ± 2.3 | +5.0 (2) | 75.0 | 75.0 | 50.0 |" in lines
