"""Pairwise MTL (seed 004 section 4.4.1): which tasks help or hurt which.

For N tasks: N single-task baselines and N·(N−1)/2 two-task refinement runs, each over K seeds.
The run on {s, t} scores both directions: s → t (t's gain from s) and t → s. The verdicts and
files are made by `mtbio.reporting.relations`; the cells are run by `mtbio.experiments.sweep`.
"""
from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, decision_rule, resolve_tasks
from mtbio.experiments.launchers import drive_sweep, start_study
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import (Cell, baseline_cell, baseline_trivial, cell_score, read_cells,
                                    seeds_of)
from mtbio.reporting.affinity import AFFINITY, pruned_pairs, read_json
from mtbio.reporting.relations import build_relations, undecided_cells, write_relations
from mtbio.reporting.studies import study, task_label
from mtbio.reporting.verdicts import Rule
from mtbio.tasks.loading import load_run_tasks
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR, RunConfig


def pairwise_cells(sweep_dir: Path, tasks: list[TaskDef], config: StudyConfig,
                   keep: set[frozenset[str]] | None = None) -> list[Cell]:
    """Baselines first, then the pairs (those in `keep`, when given), seed by seed."""
    lr = config.learning_rate(REFINE_LR)
    cells = [baseline_cell(sweep_dir, t.name, s, lr) for s in seeds_of(config) for t in tasks]
    for seed in seeds_of(config):
        for a, b in combinations([t.name for t in tasks], 2):
            if keep is not None and frozenset((a, b)) not in keep:
                continue
            cells.append(pair_cell(sweep_dir, (a, b), seed, lr))
    return cells


def pair_cell(sweep_dir: Path, pair: tuple[str, ...], seed: int, lr: float) -> Cell:
    a, b = pair
    return Cell("pair", (a, b), seed, sweep_dir / "pairs" / f"{a}+{b}" / f"seed-{seed}", "refine", lr)


def next_round(relations: dict[str, Any], tasks: list[TaskDef], sweep_dir: Path, config: StudyConfig) -> list[Cell]:
    """The cells of the next adaptive round: one more seed for the cells of every undecided edge."""
    assert config.max_seeds is not None
    order = [t.name for t in tasks]
    lr = config.learning_rate(REFINE_LR)
    return [baseline_cell(sweep_dir, names[0], seed, lr) if kind == "baseline"
            else pair_cell(sweep_dir, tuple(sorted(names, key=order.index)), seed, lr)
            for kind, names, seed in undecided_cells(relations, config.max_seeds)]


def collect_relations(cells: list[Cell], tasks: list[TaskDef], config: StudyConfig,
                      rule: Rule | None = None) -> dict[str, Any]:
    """Read every cell's scores and build relations.json's content, judged by `rule` (default: the config's)."""
    by_name = {t.name: t for t in tasks}
    splits = ["dev", "test"] if config.eval_test else ["dev"]
    baseline: dict[str, dict[str, dict[int, float]]] = {s: {t.name: {} for t in tasks} for s in splits}
    together: dict[str, dict[tuple[str, str], dict[int, float]]] = {s: {} for s in splits}
    for cell in cells:
        for split in splits:
            if cell.kind == "baseline":
                score = cell_score(cell, by_name[cell.tasks[0]], split)
                if score is not None:
                    baseline[split][cell.tasks[0]][cell.seed] = score
                continue
            for target in cell.tasks:
                partner = next(t for t in cell.tasks if t != target)
                score = cell_score(cell, by_name[target], split)
                if score is not None:
                    together[split].setdefault((partner, target), {})[cell.seed] = score
    metrics = {t.name: t.metric for t in tasks}
    test = (baseline["test"], together["test"]) if config.eval_test else None
    return build_relations(metrics, baseline["dev"], together["dev"], rule or decision_rule(config), "dev", test,
                           baseline_trivial(cells))


def pairwise(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Run (or resume) the pairwise sweep and write its relation files; with `dry_run`, only print
    the plan. Returns the sweep directory and relations.json's content (None for a dry run)."""
    catalog = catalog_for(config)
    tasks = resolve_tasks(config, catalog)
    if len(tasks) < 2:
        raise MtbioError("pairwise needs at least two tasks (--tasks a,b,... or --domain D)")
    state, echo, data_dir = start_study(config, tasks, echo)
    sweep_dir = study("pairwise").sweep_dir(config, task_label(config, tasks))
    keep = pruned(config, tasks, echo)
    cells = pairwise_cells(sweep_dir, tasks, config, keep)
    collect = lambda done: collect_relations(done, tasks, config)  # noqa: E731
    while True:
        relations = drive_sweep(cells, config, catalog.tasks, data_dir, state, sweep_dir, collect, write_relations,
                                echo)
        if config.max_seeds is None:
            return sweep_dir, relations
        if relations is None and config.dry_run and all(c.done for c in cells):
            relations = collect(cells)
            more = next_round(relations, tasks, sweep_dir, config)
            echo(f"--max-seeds {config.max_seeds}: {len(more)} cell(s) in the next adaptive round"
                 + "".join(f"\n  {c.describe()}" for c in more))
            return sweep_dir, None
        more = [] if relations is None else next_round(relations, tasks, sweep_dir, config)
        if not more:
            return sweep_dir, relations
        echo(f"adaptive seeds: {len(more)} cell(s) for the undecided edges")
        cells += more


def pruned(config: StudyConfig, tasks: list[TaskDef], echo: Callable[[str], None]) -> set[frozenset[str]] | None:
    """--prune K --affinity DIR: the pairs holding each target's K most promising partners (None: all)."""
    if (config.prune is None) != (config.affinity is None):
        raise MtbioError("--prune K and --affinity DIR go together (the affinity run ranks each target's partners)")
    if config.prune is None:
        return None
    assert config.affinity is not None
    predicted = read_json(Path(config.affinity), AFFINITY.summary)
    by = config.prune_by or predicted["default_predictor"]
    keep = pruned_pairs(predicted, [t.name for t in tasks], config.prune, by)
    total = len(tasks) * (len(tasks) - 1) // 2
    echo(f"--prune {config.prune}: {len(keep)} of {total} pairs, ranked by {by} in {config.affinity}")
    return keep


def rebuild_relations(sweep_dir: Path, rule: Rule = Rule()) -> list[Path]:
    """Write relations.json and its pictures from the finished cells of a pairwise sweep directory, at
    any time (while cells still train, or after some failed), judged by `rule`: `mtbio report SWEEP_DIR` calls it.
    A pair not finished for some seed uses the seeds it has."""
    protocol = json.loads((sweep_dir / "sweep.json").read_text()).get("protocol", {})
    cells = [c for c in read_cells(sweep_dir) if c.kind in ("baseline", "pair") and c.done]
    if not any(c.kind == "pair" for c in cells):
        raise MtbioError(f"{sweep_dir}: no finished pair cell yet (see: mtbio sweep status {sweep_dir})")
    tasks: dict[str, TaskDef] = {}
    for cell in cells:
        tasks.update(load_run_tasks(cell.run_dir))
    baselined = {c.tasks[0] for c in cells if c.kind == "baseline"}
    cells = [c for c in cells if set(c.tasks) <= baselined]  # a Δ needs the target's baseline
    config = RunConfig(eval_test=bool(protocol.get("eval_test", False)))
    return write_relations(sweep_dir, collect_relations(cells, [tasks[t] for t in sorted(baselined)], config, rule))

