"""A study is one registered unit: the leave-one-out study of `tests/plugins/` (a stage module and a report module,
outside the package) is a command through `--include-package`, describes its cells, and `mtbio report DIR --rule`
shows and re-judges its directory through $MTBIO_PLUGINS, as the shipped studies are."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parent / "plugins"


def _mtbio(args: list[str], cwd: Path, plugins: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH")) if p)}
    env.pop("MTBIO_PLUGINS", None)
    if plugins:
        env["MTBIO_PLUGINS"] = plugins
    return subprocess.run([sys.executable, "-m", "mtbio", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_a_plugin_study_runs_describes_its_cells_and_is_rejudged_by_report(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    out = tmp_path / "loo"
    command = ["leave-one-out", "--tasks", "kw-few,kw-all,kw-noise", "--task-defs", defs, "--data-dir", data,
               "--encoder", micro_encoder, "--output", str(out), "--seeds", "3", "--epochs", "1", "--batch-size", "8",
               "--lr", "5e-3", "--max-train-examples", "24"]
    assert "No such command 'leave-one-out'" in _mtbio(command, tmp_path).stderr  # nothing without the plugin

    ran = _mtbio(["--include-package", "leave_one_out", *command], tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    started = re.findall(r"^\[\d+/12\] (.*) → ", ran.stdout, re.M)  # 3 seeds × (every task + one run without each)
    assert started[:2] == ["refine on all 3 tasks, seed 42", "refine without one task (kw-all + kw-noise), seed 42"]
    assert len(started) == 12 and "leave-one-out (v2): Δ = score without the task" in ran.stdout

    saved = json.loads((out / "leave_one_out.json").read_text())
    assert saved["kind"] == "leave-one-out" and saved["decision_rule"]["version"] == "v2"
    assert saved["family"]["m"] == 6 and set(saved["comparisons"]) == {
        f"{left} -> {task}" for left in ("kw-few", "kw-all", "kw-noise") for task in ("kw-few", "kw-all", "kw-noise")
        if left != task}

    def accuracy(run: str, seed: int, task: str) -> float:
        return json.loads((out / "runs" / run / f"seed-{seed}" / "results.json").read_text())["dev"][task]["accuracy"]

    cell = saved["comparisons"]["kw-all -> kw-few"]
    deltas = [accuracy("without-kw-all", s, "kw-few") - accuracy("all", s, "kw-few") for s in (42, 43, 44)]
    assert cell["delta"] == pytest.approx(statistics.fmean(deltas)) and cell["n_seeds"] == 3

    before = (out / "leave_one_out.json").read_bytes()
    again = _mtbio(["report", str(out), "--rule", "v1", "--output", str(tmp_path / "v1")], tmp_path,
                   plugins="leave_one_out")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "leave-one-out (v1): Δ" in again.stdout
    assert f"written: {tmp_path / 'v1' / 'leave_one_out.json'}" in again.stdout
    assert (out / "leave_one_out.json").read_bytes() == before  # another rule is written elsewhere, not over the study
    rejudged = json.loads((tmp_path / "v1" / "leave_one_out.json").read_text())
    assert rejudged["decision_rule"]["version"] == "v1" and rejudged["family"]["rule"] == "v1"
    assert {n: c["delta"] for n, c in rejudged["comparisons"].items()} == pytest.approx(
        {n: c["delta"] for n, c in saved["comparisons"].items()})
    lines = [line for line in again.stdout.splitlines() if line.startswith("  without ")]
    assert len(lines) == 6 and all(re.search(r"Δ [+-]\d\.\d{4}  \S", line) for line in lines)

    status = _mtbio(["sweep", "status", str(out)], tmp_path, plugins="leave_one_out")
    assert status.returncode == 0 and "refine without one task (kw-few + kw-all), seed 44" in status.stdout
