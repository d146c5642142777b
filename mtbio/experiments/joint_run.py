"""The joint refinement run of every seed that the lookahead and cosine predictors measure.

    <dir>/
        sweep.json                      the training options and the measurement settings (checked on rerun)
        seed-<s>/                       an ordinary refine run over all the tasks, plus
        seed-<s>/affinity_points.json   its measurements (`mtbio.training.affinity`), written last

A seed whose affinity_points.json exists is finished and skipped on a rerun; an unfinished one is
removed and trained again.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.sweep import Cell, cell_config, check_protocol, protocol, seeds_of
from mtbio.experiments.training_run import train_tasks
from mtbio.fileio import write_json
from mtbio.reporting.affinity import build_affinity
from mtbio.tasks.schema import TaskDef
from mtbio.training.affinity import AffinityProbe
from mtbio.training.config import REFINE_LR, RunConfig
from mtbio.run_dir import RunDir

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


def joint_affinity(config: RunConfig, tasks: list[TaskDef], data_dir: Path, directory: Path, default: str,
                   echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the joint run of every seed; returns affinity.json's content (`default`: the
    predictor its graph shows)."""
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
                        listeners=[probe])
            write_json(points, probe.summary())
            shutil.rmtree(RunDir(cell.run_dir).checkpoints_dir, ignore_errors=True)
        runs[seed] = {"probe": json.loads(points.read_text()),
                      "results": RunDir(cell.run_dir).results()}
    return build_affinity({t.name: t.metric for t in tasks}, runs, config.alpha, default)
