"""`mtbio leave-one-out` (a plugin study): per seed, one refine run on every task of --tasks and, per task left
out, one on all the others; each task's score without one of its partners against its score with all of them.

    <dir>/runs/all/seed-<s>/             refine on every task
    <dir>/runs/without-<task>/seed-<s>/  refine on every task but <task>
    <dir>/leave_one_out.json             the comparisons (`leave_one_out_report`)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from leave_one_out_report import (LAYOUT, build_leave_one_out, format_leave_one_out, rejudge_leave_one_out,
                                  write_leave_one_out)
from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, decision_rule, refuse_adaptive_seeds, resolve_tasks
from mtbio.experiments.launchers import drive_sweep, start_study
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import Cell, cell_score, seeds_of
from mtbio.reporting.studies import Study, register_study_kind, task_label
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR


def leave_one_out_cells(sweep_dir: Path, tasks: list[TaskDef], config: StudyConfig) -> list[Cell]:
    """Per seed: the run on every task, then one run without each task."""
    lr, names = config.learning_rate(REFINE_LR), tuple(t.name for t in tasks)
    cells = []
    for seed in seeds_of(config):
        cells.append(Cell("all", names, seed, sweep_dir / "runs" / "all" / f"seed-{seed}", "refine", lr))
        cells += [Cell("without", tuple(n for n in names if n != left), seed,
                       sweep_dir / "runs" / f"without-{left}" / f"seed-{seed}", "refine", lr) for left in names]
    return cells


def collect_leave_one_out(cells: list[Cell], tasks: list[TaskDef], config: StudyConfig) -> dict[str, Any]:
    """The finished cells' dev scores, compared (`build_leave_one_out`)."""
    by_name = {t.name: t for t in tasks}
    together: dict[str, dict[int, float]] = {t.name: {} for t in tasks}
    without: dict[tuple[str, str], dict[int, float]] = {}
    for cell in cells:
        left = next((t for t in by_name if t not in cell.tasks), None)
        for task in cell.tasks:
            score = cell_score(cell, by_name[task])
            if score is None:
                continue
            if left is None:
                together[task][cell.seed] = score
            else:
                without.setdefault((left, task), {})[cell.seed] = score
    return build_leave_one_out({t.name: t.metric for t in tasks}, together, without, decision_rule(config))


def leave_one_out(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Run (or resume) the study and write leave_one_out.json (dry run: the plan)."""
    refuse_adaptive_seeds(config, "leave-one-out")
    catalog = catalog_for(config)
    tasks = resolve_tasks(config, catalog)
    if len(tasks) < 3:
        raise MtbioError("leave-one-out needs at least three tasks (each run without one still trains two)")
    state, echo, data_dir = start_study(config, tasks, echo)
    sweep_dir = STUDY.sweep_dir(config, task_label(config, tasks))
    result = drive_sweep(leave_one_out_cells(sweep_dir, tasks, config), config, catalog.tasks, data_dir, state,
                         sweep_dir, lambda done: collect_leave_one_out(done, tasks, config), write_leave_one_out, echo)
    return sweep_dir, result


STUDY = register_study_kind(Study(
    "leave-one-out", LAYOUT, format=format_leave_one_out, write=write_leave_one_out, rejudge=rejudge_leave_one_out,
    cells={"all": lambda c: f"refine on all {len(c.tasks)} tasks",
           "without": lambda c: f"refine without one task ({' + '.join(c.tasks)})"},
    run=leave_one_out, options=("seeds", "sweep", "training"),
    help="Refine on every task and, per task left out, on all the others; each task's Δ without one partner."))
