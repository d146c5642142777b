"""benchmarks/bench_cell.py --resume: the cells already in the file are kept, those of tasks and arms this run does
not name included (a rerun of one task's missing cell must not drop the other tasks)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_resume_keeps_the_files_other_tasks_and_runs_only_the_missing_cell(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    import bench_cell

    monkeypatch.setattr(bench_cell, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_cell, "write_result", lambda name, result: (tmp_path / f"{name}.json").write_text(
        json.dumps(result)))
    ran = []

    def fake_cell(task, size, seed, options, data_dir, out):
        ran.append((task, seed, options.strip()))
        return {"seed": seed, "wall_seconds": 10.0, "phases": {"training": 9.0}, "dev": 0.5}

    monkeypatch.setattr(bench_cell, "run_cell", fake_cell)
    old = {"seed": 42, "wall_seconds": 30.0, "phases": {"training": 20.0}, "dev": 0.4}
    (tmp_path / "lane.json").write_text(json.dumps({"arms": {"recipe": "--recipe minilm", "other": "--x"},
                                                    "cells": {"a": {"recipe": [old], "other": [old]},
                                                              "b": {"recipe": [old]}}}))
    monkeypatch.setattr(sys, "argv", ["bench_cell.py", "--tasks", "b", "--seeds", "42,43", "--arm",
                                      "recipe=--recipe minilm", "--output", "lane", "--resume"])
    bench_cell.main()
    result = json.loads((tmp_path / "lane.json").read_text())
    assert ran == [("b", 43, "--recipe minilm")]
    assert result["cells"]["a"] == {"recipe": [old], "other": [old]}
    assert [c["seed"] for c in result["cells"]["b"]["recipe"]] == [42, 43]
    assert result["arms"] == {"recipe": "--recipe minilm", "other": "--x"}
