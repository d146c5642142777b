"""benchmarks/device/gpu_set.sh: the GPU set's dry run on the CPU writes every step's JSON (`-m long`: the whole set's
seventeen processes take about two CPU-minutes), and its budget guard stops a step and skips the rest, still leaving
the index and the archive."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "device" / "gpu_set.sh"


def run_set(out: Path, *options: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["bash", str(SCRIPT), *options], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


def unpack(out: Path) -> Path:
    with tarfile.open(out / "gpu_set.tgz") as archive:
        archive.extractall(out / "unpacked")
    return out / "unpacked" / "results"


@pytest.mark.long  # 17 processes start, about 2 CPU-minutes: python -m pytest -m long
def test_the_dry_run_writes_every_steps_json_with_its_figures(tmp_path: Path) -> None:
    done = run_set(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # what comes back from the device tool (at most 8 files): the index, the archive, the log
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_set.json", "gpu_set.log", "gpu_set.tgz"]
    assert "s of a 540 s budget" in done.stdout
    index = json.loads((tmp_path / "gpu_set.json").read_text())
    assert [(s["step"], s["status"]) for s in index["steps"]] == [
        (name, "done") for name in ("device", "fixed-b4", "profile", "whole-minilm", "sweep")]
    assert index["device"] == "cpu" and index["cuda"] == "no CUDA device: dry run"
    results = unpack(tmp_path)

    device = json.loads((results / "device" / "device.json").read_text())
    precision = device["precision"]
    assert precision in ("bf16", "no") and device["matmul_peak_flops_per_second"]["fp32"] > 0

    fixed = json.loads((results / "fixed-b4" / "bench_train-fixed-16-b4-compiled.json").read_text())
    sides = [f"{side}-{precision}" for side in ("trainer", "mtbio", "mtbio+compile", "trainer+compile")]
    assert list(fixed["sides"]) == sides and fixed["hyperparameters"]["batch_size"] == 4
    for side in fixed["sides"].values():
        assert 0 < side["steady_fraction_of_peak"] < 1 and side["runs"][0]["steady_after_steps"] == 1
    name = "fp32" if precision == "no" else precision
    assert fixed[f"compiled_vs_eager_{name}"]["steady_speedup"] > 0
    assert fixed[f"trainer_compiled_vs_eager_{name}"]["speedup"] > 0
    assert fixed["sides"][f"mtbio+compile-{precision}"]["runs"][0]["batching"]["compile"] is True
    assert fixed["machine"]["gpu"] == "no CUDA device" and fixed["matmul_peak_flops_per_second"]["fp32"] > 0

    [profile] = (results / "profile").glob("profile_step-fixed-16-*-co1.json")
    profile = json.loads(profile.read_text())
    assert profile["compile"] is True and profile["batch_size"] == 4 and profile["wall_seconds_per_step"] > 0
    assert profile["device_time"] == "no CUDA device" and profile["matmul_peak_flops_per_second"]["fp32"] > 0

    whole = json.loads((results / "whole-minilm" / "bench_train-demo-ner.json").read_text())
    assert set(whole["sides"]) == {f"mtbio-{precision}", f"trainer-{precision}"}
    assert whole[f"speed_ratio_{name}"] > 0 and f"difference_points_{name}" in whole

    sweep = json.loads((results / "sweep" / "bench_sweep.json").read_text())
    alone, shared = sweep["runs"]
    assert (alone["parallel"], shared["parallel"]) == ("1", "2") and alone["cells"] == shared["cells"] == 3
    assert shared["throughput_over_one_cell"] == (shared["aggregate_train_examples_per_second"]
                                                  / alone["aggregate_train_examples_per_second"])
    assert shared["utilisation"] == "no CUDA device" and sweep["matmul_peak_flops_per_second"]["fp32"] > 0
    # the index carries each file's headline figures
    step = next(s for s in index["steps"] if s["step"] == "fixed-b4")
    figures = step["files"]["fixed-b4/bench_train-fixed-16-b4-compiled.json"]["sides"]
    assert figures[f"mtbio-{precision}"]["steady_fraction_of_peak"] == \
        fixed["sides"][f"mtbio-{precision}"]["steady_fraction_of_peak"]


def test_the_budget_stops_a_step_and_skips_the_rest(tmp_path: Path) -> None:
    started = time.monotonic()
    done = run_set(tmp_path, "--dry-run", "--budget-s", "30", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < 30 + 15  # the summary may take a moment past the budget's end on a busy CPU
    index = json.loads((tmp_path / "gpu_set.json").read_text())
    statuses = {s["step"]: s["status"] for s in index["steps"]}
    assert statuses.pop("device") in ("stopped at the budget", "done")
    assert set(statuses.values()) == {"skipped"} and "fixed-b4" in statuses
    assert (tmp_path / "gpu_set.tgz").is_file()


def test_kernel_gaps_measure_the_devices_idle_time_between_kernels() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_step import kernel_gaps

    # kernels of two steps in microseconds: two overlapping, then a gap of 8, then one of 1
    gaps = kernel_gaps([(20, 30), (0, 10), (5, 12), (31, 40)], steps=2)
    assert gaps == {"kernels_per_step": 2.0, "busy_seconds_per_step": 31 / 2 / 1e6,
                    "gap_seconds_per_step": 9 / 2 / 1e6, "gaps_per_step": 1.0, "median_gap_us": 8,
                    "largest_gap_us": 8}
