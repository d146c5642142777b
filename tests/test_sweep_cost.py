"""A sweep's cost from its cells' results.json: efficiency against the matmul peak, where the cell time went,
the idle slot time; and the useful FLOPs a run records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtbio.experiments.sweep import Cell
from mtbio.experiments.sweep_status import describe_cost, sweep_cost


def _cell(root: Path, name: str, start: float, end: float, flops: float, phases: dict[str, float]) -> Cell:
    run = root / name / "seed-42"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({
        "started_at": start, "finished_at": end, "mixed_precision": "bf16", "phase_seconds": phases,
        "useful_flops": {"train": flops * 0.75, "evaluate": flops * 0.25}, "peak_rss_mb": 900.0 + start}))
    return Cell("baseline", (name,), 42, run, "single-task", 1e-4)


def test_efficiency_breakdown_and_idle_slots_against_hand_counts(tmp_path: Path) -> None:
    cells = [_cell(tmp_path, "a", 100, 200, 4e12, {"setup": 10, "train": 70, "evaluate": 15, "save": 1}),
             _cell(tmp_path, "b", 100, 150, 2e12, {"setup": 5, "train": 40, "evaluate": 4, "save": 0}),
             _cell(tmp_path, "c", 150, 250, 4e12, {"setup": 10, "train": 80, "evaluate": 8, "save": 2})]
    waiting = Cell("baseline", ("d",), 42, tmp_path / "d" / "seed-42", "single-task", 1e-4)  # no results: left out
    cost = sweep_cost([*cells, waiting], peak=lambda precision: {"bf16": 1e11, "fp32": 5e10}[precision])
    assert cost is not None and cost["cells"] == 3
    assert cost["wall_seconds"] == 150 and cost["precision"] == "bf16"
    assert cost["efficiency"] == pytest.approx(10e12 / (150 * 1e11))  # 0.667
    assert cost["cell_seconds"] == 250
    assert cost["phase_seconds"] == {"setup": 25, "train": 190, "evaluate": 27, "save": 3, "other": 5}
    assert cost["slots"] == 2 and cost["idle_slot_seconds"] == 2 * 150 - 250
    assert cost["peak_rss_mb"] == 1050
    text = describe_cost(cost)
    assert "66.7% of the machine" in text and "train 76%" in text and "2 at once" in text
    assert sweep_cost([waiting]) is None


@pytest.mark.long  # the cost arithmetic against hand counts above; the sweep it times is the engine test_relations runs
def test_bench_sweep_times_a_sweep_and_writes_its_cost(tmp_path: Path, micro_encoder: str,
                                                       keyword_tasks: tuple[str, str]) -> None:
    """With a baseline interpreter (here this one, so the same code), the baseline sweep runs first and both are
    compared over the command's wall time; the same code and seed train the same models."""
    import subprocess
    import sys

    from mtbio.experiments.layout import usable_cores

    defs, data = keyword_tasks
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_sweep.py"), "--tasks", "kw-few,kw-all",
                           "--task-defs", defs, "--data-dir", data, "--encoder", micro_encoder, "--recipe", "mt-bert",
                           "--mixed-precision", "no", "--parallel", "1", "--results-dir", str(tmp_path),
                           "--baseline-python", sys.executable, "--baseline-parallel", "1", "--peak-seconds", "0.2", "--",
                           "--epochs", "1", "--batch-size", "8"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "bench_sweep.json").read_text())
    run = result["runs"][0]
    assert run["cells"] == 3 and 0 < run["efficiency"] < 1 and run["peak_rss_mb"] > 0
    assert (run["processes"], run["threads_each"]) == (1, usable_cores())  # --parallel 1: one process, every core
    assert run["matmul_peak_after"]["fp32"] > 1e8
    assert set(run["dev"]) == {"baselines/kw-few/seed-42", "baselines/kw-all/seed-42", "pairs/kw-few+kw-all/seed-42"}
    assert result["machine"]["cores"] >= 1 and result["matmul_peak_flops_per_second"]["fp32"] > 1e8
    baseline = result["baseline"]
    assert baseline["parallel"] == "1" and baseline["code"]["mtbio"] == str(root / "mtbio")
    assert set(baseline["dev"]) == set(run["dev"]) and run["largest_dev_difference_from_baseline"] == 0.0
    assert run["speedup_over_baseline"] == pytest.approx(baseline["command_wall_seconds"] / run["command_wall_seconds"])
    measured = [result["matmul_peak_flops_per_second"], baseline["matmul_peak_after"], run["matmul_peak_after"]]
    assert run["peak_flops_per_second"] == max(m["fp32"] for m in measured)  # the highest peak measured
    for side in (baseline, run):  # the same cells' FLOPs over each command's wall time and each cells' wall time
        assert side["command_efficiency"] == pytest.approx(
            run["useful_flops"] / (side["command_wall_seconds"] * run["peak_flops_per_second"]))
        assert side["peak_flops_per_second"] == run["peak_flops_per_second"]
        assert side["efficiency"] == pytest.approx(
            run["useful_flops"] / (side["wall_seconds"] * run["peak_flops_per_second"]))
