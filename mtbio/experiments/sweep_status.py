"""`mtbio sweep status DIR`: every cell of a sweep (done / running / failed / waiting), its scores
so far, what a running or failed cell printed last, the time left, and how well the finished cells
used the machine (`sweep_cost`)."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.cell_locks import failures, held_by_other, lock_path, read_owner
from mtbio.experiments.sweep import Cell, cell_results, format_duration, read_cells
from mtbio.reporting.relations import PAIRWISE, STILT, describe_reliability
from mtbio.run_dir import SweepDir
from mtbio.tasks.loading import saved_task_fields
from mtbio.training.flops import cached_peak


def cell_state(cell: Cell) -> str:
    if cell.done:
        return "done"
    if held_by_other(cell.run_dir):
        return "running"
    return "failed" if failures(cell.run_dir) else "waiting"


def _scores(cell: Cell) -> str:
    """The dev score of each task under its primary metric."""
    results = cell_results(cell)
    shown = []
    for task, scores in results.get("dev", {}).items():
        try:
            metric = saved_task_fields(cell.run_dir, task)["metric"]
        except (MtbioError, KeyError):
            metric = next(iter(scores))
        shown.append(f"{task} {metric} {scores[metric]:.4f}")
    return "; ".join(shown)


def _last_line(cell: Cell) -> str:
    try:
        lines = [line for line in (cell.run_dir / "run.log").read_text().splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    line = lines[-1]  # its timestamp kept whole, the middle of a long message left out
    return line if len(line) <= 100 else f"{line[:20]}…{line[-79:]}"


def _detail(cell: Cell, state: str, now: float) -> str:
    if state == "done":
        return _scores(cell)
    if state == "running":
        owner = read_owner(lock_path(cell.run_dir)) or {}
        job = f" job {owner['job_id']}" if owner.get("job_id") else ""
        since = format_duration(now - float(owner.get("started", now)))
        last = _last_line(cell)
        return f"{owner.get('host', '?')} pid {owner.get('pid', '?')}{job}, {since}" + (f"; last: {last}" if last else "")
    if state == "failed":
        attempts = failures(cell.run_dir)
        return f"{len(attempts)} attempt(s); last error: {attempts[-1]['error'][:120]}"
    return ""


def sweep_cost(cells: list[Cell], peak: Callable[[str], float] | None = None) -> dict[str, Any] | None:
    """How the finished cells used the machine: wall time from the first cell's start to the last one's end,
    the cells' useful FLOPs over wall time × the matmul peak of their precision (`peak(precision)`, measured
    once per machine by default), and where the cell time went (setup, train, evaluate, save, the rest), with
    the idle time of the cell slots (most cells seen running at once × wall, less the cells' time).
    None until a finished cell recorded its cost."""
    records = [cell_results(c) for c in cells if c.done]
    records = [r for r in records if r.get("started_at") and r.get("useful_flops")]
    if not records:
        return None
    peak = peak or (lambda precision: float(cached_peak(precision)["flops_per_second"]))
    start, end = min(r["started_at"] for r in records), max(r["finished_at"] for r in records)
    wall = max(end - start, 1e-9)
    precisions = sorted({"fp32" if r.get("mixed_precision") in (None, "no") else r["mixed_precision"] for r in records})
    flops = sum(sum(r["useful_flops"].values()) for r in records)
    top = max(peak(p) for p in precisions)
    phases = {name: sum(r["phase_seconds"][name] for r in records) for name in ("setup", "train", "evaluate", "save")}
    cell_seconds = sum(r["finished_at"] - r["started_at"] for r in records)
    phases["other"] = max(0.0, cell_seconds - sum(phases.values()))
    edges = sorted([(r["started_at"], 1) for r in records] + [(r["finished_at"], -1) for r in records])
    running, slots = 0, 0
    for _, change in edges:
        running += change
        slots = max(slots, running)
    return {"cells": len(records), "wall_seconds": wall, "useful_flops": flops, "precision": precisions[-1],
            "peak_flops_per_second": top, "efficiency": flops / (wall * top), "cell_seconds": cell_seconds,
            "phase_seconds": phases, "slots": slots, "idle_slot_seconds": max(0.0, slots * wall - cell_seconds),
            "peak_rss_mb": max(float(r.get("peak_rss_mb") or 0) for r in records)}


def describe_cost(cost: dict[str, Any]) -> str:
    """Two lines: the efficiency, and where the cell time went."""
    shares = ", ".join(f"{name} {seconds / max(cost['cell_seconds'], 1e-9):.0%}"
                       for name, seconds in cost["phase_seconds"].items())
    return (f"efficiency: {cost['useful_flops'] / 1e12:.1f} TFLOP useful in {format_duration(cost['wall_seconds'])} "
            f"of wall time at a {cost['precision']} matmul peak of {cost['peak_flops_per_second'] / 1e9:.0f} GFLOP/s: "
            f"{cost['efficiency']:.1%} of the machine ({cost['cells']} finished cells)\n"
            f"cell time {format_duration(cost['cell_seconds'])}: {shares}; {cost['slots']} at once at most, "
            f"{format_duration(cost['idle_slot_seconds'])} of slot time idle; peak memory of a cell's process "
            f"{cost['peak_rss_mb']:.0f} MB")


def status_table(sweep_dir: Path) -> str:
    """The table of cells, a count per state and the estimated time left."""
    cells = read_cells(sweep_dir)
    now = time.time()
    states = [cell_state(c) for c in cells]
    rows = [f"{'state':8s} {'cell':44s} detail"]
    for cell, state in zip(cells, states):
        rows.append(f"{state:8s} {cell.describe():44s} {_detail(cell, state, now)}".rstrip())
    counts = {s: states.count(s) for s in ("done", "running", "failed", "waiting")}
    rows.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    walls = [float(cell_results(c).get("wall_seconds", 0)) for c, s in zip(cells, states)
             if s == "done"]
    left = counts["running"] + counts["waiting"]
    if left and walls:
        seconds = statistics.median(walls) * left / max(counts["running"], 1)
        rows.append(f"time left: ~{format_duration(seconds)} ({left} cells at the median {format_duration(statistics.median(walls))} "
                    f"a cell, {max(counts['running'], 1)} at a time)")
    elif left:
        rows.append("time left: unknown until a cell finishes")
    cost = sweep_cost(cells)
    if cost is not None:
        rows.append(describe_cost(cost))
    for layout in (PAIRWISE, STILT):  # the graph as last written
        path = SweepDir(sweep_dir).summary_file(layout)
        if path.is_file():
            line = describe_reliability(json.loads(path.read_text()))
            rows += [f"{path.name}: {line}"] if line else []
    return "\n".join(rows)
