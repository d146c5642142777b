"""The leave-one-out study's summary (leave_one_out.json): per task left out, each other task's score in the refine
run without it against the run on every task, per seed, one family; its text, its file and its re-judge."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from mtbio.fileio import write_json
from mtbio.reporting.verdicts import Rule, Scores, compare, correct, recompare, summary, verdict_text
from mtbio.run_dir import register_study

LAYOUT = register_study("leave-one-out", "leave_one_out.json", ("runs",))


def build_leave_one_out(metrics: Mapping[str, str], together: Mapping[str, Scores],
                        without: Mapping[tuple[str, str], Scores], rule: Rule) -> dict[str, Any]:
    """`together[task]`: the task's scores in the run on every task; `without[(left, task)]`: in the run without
    `left`. Each comparison is Δ = without − together (a positive Δ: the task does better without `left`)."""
    comparisons = {f"{left} -> {task}": {"left_out": left, "task": task,
                                         **compare(scores, together[task], metrics[task])}
                   for (left, task), scores in without.items()}
    return {"kind": LAYOUT.kind, "tasks": list(metrics), "metrics": dict(metrics),
            "together": {task: summary(scores) for task, scores in together.items()},
            "comparisons": comparisons, "family": correct(comparisons, rule), **rule.fields()}


def rejudge_leave_one_out(data: dict[str, Any], rule: Rule) -> None:
    """The saved comparisons judged again under `rule` from their per-seed scores, in place."""
    fresh = {name: recompare(cell, data["metrics"][cell["task"]]) for name, cell in data["comparisons"].items()}
    data["family"] = correct(fresh, rule)
    data["comparisons"] = fresh
    data.update(rule.fields())


def format_leave_one_out(data: dict[str, Any]) -> str:
    """One line per comparison: the task left out, the task scored, Δ and the verdict."""
    lines = [f"leave-one-out ({data['decision_rule']['version']}): Δ = score without the task − with every task"]
    for cell in data["comparisons"].values():
        lines.append(f"  without {cell['left_out']:10s} {cell['task']:10s} Δ {cell['delta']:+.4f}  "
                     f"{verdict_text(cell)}")
    return "\n".join(lines)


def write_leave_one_out(directory: Path, data: dict[str, Any]) -> list[Path]:
    """leave_one_out.json; returns its path."""
    return [write_json(directory / LAYOUT.summary, data)]
