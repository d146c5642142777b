"""`mtbio sweep status DIR`: every cell of a sweep (done / running / failed / waiting), its scores
so far, what a running or failed cell printed last, and the time left."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import yaml

from mtbio.experiments.cell_locks import failures, held_by_other, lock_path, read_owner
from mtbio.experiments.sweep import Cell, cell_results, format_duration, read_cells
from mtbio.reporting.relations import describe_reliability
from mtbio.run_dir import RunDir, SweepDir


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
            metric = yaml.safe_load((RunDir(cell.run_dir).tasks_dir / f"{task}.yml").read_text())["metric"]
        except (OSError, KeyError, TypeError):
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
    for kind in ("pairwise", "stilt"):  # the graph as last written
        path = SweepDir(sweep_dir).summary_file(kind)
        if path.is_file():
            line = describe_reliability(json.loads(path.read_text()))
            rows += [f"{path.name}: {line}"] if line else []
    return "\n".join(rows)
