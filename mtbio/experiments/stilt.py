"""STILT, supplementary training on intermediate labelled-data tasks (seeds 000 and 003).

For each intermediate task i and target task t (i ≠ t) and seed: train i alone (the same cell as
i's single-task baseline), then train t with a new head from that run's encoder, and compare with
t's baseline of the same seed. The target stage uses the baseline's learning rate (5e-5 unless
--lr), so the starting encoder is the only difference from the baseline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, decision_rule, refuse_adaptive_seeds
from mtbio.experiments.launchers import drive_sweep, start_study
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import Cell, baseline_cell, baseline_trivial, cell_score, seeds_of
from mtbio.reporting.relations import build_stilt, write_stilt
from mtbio.reporting.studies import study, task_label
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR


def stilt_tasks(config: StudyConfig) -> tuple[list[TaskDef], list[TaskDef]]:
    """Intermediate and target tasks: --intermediate / --target, each defaulting to --tasks/--domain."""
    catalog = catalog_for(config)
    everything = catalog.resolve(config.tasks, config.domain) if (config.tasks or config.domain) else []
    inters = catalog.resolve(config.intermediate) if config.intermediate else everything
    targets = catalog.resolve(config.target) if config.target else everything
    if not inters or not targets:
        raise MtbioError("name the tasks: --intermediate a,b --target c,d (or --tasks/--domain for every pair)")
    return inters, targets


def stilt_cells(sweep_dir: Path, inters: list[TaskDef], targets: list[TaskDef], config: StudyConfig) -> list[Cell]:
    """Per seed: the baselines of every task involved (the intermediate runs among them), then the transfers."""
    lr = config.learning_rate(REFINE_LR)
    names = list(dict.fromkeys([t.name for t in inters] + [t.name for t in targets]))
    cells = []
    for seed in seeds_of(config):
        cells += [baseline_cell(sweep_dir, name, seed, lr) for name in names]
        for inter in inters:
            for target in targets:
                if inter.name != target.name:
                    cells.append(Cell("transfer", (target.name,), seed,
                                      sweep_dir / "transfer" / f"{inter.name}-to-{target.name}" / f"seed-{seed}",
                                      "finetune", lr, from_cell=baseline_cell(sweep_dir, inter.name, seed, lr).run_dir))
    return cells


def collect_stilt(cells: list[Cell], inters: list[TaskDef], targets: list[TaskDef], config: StudyConfig) -> dict[str, Any]:
    by_name = {t.name: t for t in inters + targets}
    baseline: dict[str, dict[int, float]] = {t.name: {} for t in targets}
    transferred: dict[tuple[str, str], dict[int, float]] = {}
    for cell in cells:
        target = cell.tasks[0]
        score = cell_score(cell, by_name[target])
        if score is None:
            continue
        if cell.kind == "baseline" and target in baseline:
            baseline[target][cell.seed] = score
        elif cell.kind == "transfer" and cell.from_cell is not None:
            transferred.setdefault((cell.from_cell.parent.name, target), {})[cell.seed] = score
    return build_stilt({t.name: t.metric for t in targets}, [t.name for t in inters], baseline, transferred,
                       decision_rule(config), trivial=baseline_trivial(cells))


def stilt(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Run (or resume) the STILT sweep and write stilt.json, stilt_matrix.csv/png (dry run: the plan)."""
    refuse_adaptive_seeds(config, "stilt")
    inters, targets = stilt_tasks(config)
    adapter = config.adapter_spec()[0]
    if adapter != "none":
        raise MtbioError(f"stilt --adapter {adapter}: an intermediate LoRA run leaves its encoder/ the base "
                         "encoder (the adapter is its task's own), so a transfer would start where the baseline does; "
                         "run STILT with full training")
    if all(i.name == t.name for i in inters for t in targets):
        raise MtbioError("STILT needs an intermediate task different from the target")
    involved = list({t.name: t for t in inters + targets}.values())
    state, echo, data_dir = start_study(config, involved, echo)
    sweep_dir = study("stilt").sweep_dir(config, task_label(config, involved))
    cells = stilt_cells(sweep_dir, inters, targets, config)
    result = drive_sweep(cells, config, catalog_for(config).tasks, data_dir, state, sweep_dir,
                         lambda done: collect_stilt(done, inters, targets, config), write_stilt, echo)
    return sweep_dir, result
