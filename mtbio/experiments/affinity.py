"""`mtbio affinity`: predict the task-relation graph from one joint refinement run per seed.

    <dir>/
        sweep.json                  the training options and the measurement settings (checked on rerun)
        seed-<s>/                   an ordinary refine run over all the tasks, plus
        seed-<s>/affinity_points.json   its measurements (`mtbio.training.affinity`), written last
        affinity.json, affinity_matrix.csv/.png, cosine_matrix.csv/.png, affinity.dot/.graphml/.png

A seed whose affinity_points.json exists is finished and skipped on a rerun; an unfinished one is
removed and trained again.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, data_dir_for, resolve_tasks
from mtbio.experiments.pairwise import sweep_dir_for
from mtbio.experiments.sweep import Cell, cell_config, check_data, check_protocol, processes, protocol, seeds_of
from mtbio.experiments.training_run import train_tasks
from mtbio.fileio import write_json
from mtbio.reporting.affinity import build_affinity, write_affinity
from mtbio.training.affinity import AffinityProbe
from mtbio.training.config import REFINE_LR, RunConfig
from mtbio.training.results import read_results

POINTS = "affinity_points.json"


def measurement(config: RunConfig) -> dict[str, Any]:
    return {"affinity_every": config.affinity_every, "affinity_batch_size": config.affinity_batch_size,
            "affinity_split": config.affinity_split}


def check_measurement(directory: Path, config: RunConfig) -> None:
    """The training options (as a sweep checks them) and the measurement settings must match the saved ones."""
    check_protocol(directory, config)
    path = directory / "sweep.json"
    saved = json.loads(path.read_text()).get("measurement") if path.is_file() else None
    if saved is not None and saved != measurement(config):
        raise MtbioError(f"{directory} holds runs measured with {saved}; use the same settings or another --output")


def affinity(config: RunConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any]]:
    """Run (or resume) the joint runs of every seed and write the predicted relation files; returns
    the directory and affinity.json's content."""
    catalog = catalog_for(config)
    tasks = resolve_tasks(config, catalog)
    if len(tasks) < 2:
        raise MtbioError("affinity needs at least two tasks (--tasks a,b,... or --domain D)")
    if config.adapter != "none":
        raise MtbioError(f"affinity --adapter {config.adapter}: with an adapter per task no trained weight is shared, "
                         "so one task's step cannot move another's loss; measure affinities with full training")
    state = processes(config)
    if state.num_processes > 1:
        raise MtbioError("affinity runs in one process (the measurement is not distributed); run it without "
                         "accelerate launch")
    data_dir = data_dir_for(config)
    check_data(tasks, data_dir)
    directory = sweep_dir_for(config, tasks, "affinity")
    check_measurement(directory, config)
    write_json(directory / "sweep.json", {"protocol": protocol(config), "measurement": measurement(config)})
    lr = config.learning_rate(REFINE_LR)
    names = tuple(t.name for t in tasks)
    runs = {}
    for seed in seeds_of(config):
        cell = Cell("refine", names, seed, directory / f"seed-{seed}", "refine", lr)
        points = cell.run_dir / POINTS
        if not points.is_file():
            if cell.run_dir.exists():
                echo(f"removing unfinished run {cell.run_dir}")
                shutil.rmtree(cell.run_dir)
            echo(f"joint run of {len(names)} tasks with affinity measurement, seed {seed} → {cell.run_dir}")
            probe = AffinityProbe(config.affinity_every, config.affinity_batch_size, seed, config.affinity_split)
            train_tasks(list(tasks), cell_config(config, cell), cell.run_dir, config.encoder, lr, "refine", data_dir,
                        step_hooks=[probe])
            write_json(points, probe.summary())
            shutil.rmtree(cell.run_dir / "checkpoints", ignore_errors=True)
        runs[seed] = {"probe": json.loads(points.read_text()),
                      "results": read_results(cell.run_dir)}
    result = build_affinity({t.name: t.metric for t in tasks}, runs, config.alpha)
    for path in write_affinity(directory, result):
        echo(f"written: {path}")
    return directory, result
