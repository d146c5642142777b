"""`mtbio affinity`: predict the task-relation graph with a transfer predictor (`mtbio.experiments.predictors`).

    <dir>/
        affinity.json, <predictor>_matrix.csv/.png   the predicted scores (`mtbio.reporting.affinity`)
        affinity.dot/.graphml/.png                   lookahead and cosine: the graph of the joint run
        sweep.json, seed-<s>/                        lookahead and cosine: the joint runs (`joint_run`)

The default directory is runs/affinity/<tasks> for the joint-run predictors (they share it) and
runs/affinity-<predictor>/<tasks> for the others.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, data_dir_for, refuse_adaptive_seeds, resolve_tasks
from mtbio.experiments.predictors import PREDICTORS, PredictionJob
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import check_data, processes
from mtbio.reporting.affinity import JOINT_PREDICTORS, write_affinity
from mtbio.reporting.studies import study, task_label
from mtbio.tasks.schema import TaskDef


def predict_relations(config: StudyConfig, tasks: list[TaskDef], directory: Path,
                      echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run `config.predictor` on `tasks` into `directory` and write its files; returns affinity.json's content."""
    name = config.predictor_spec()[0]
    predict = PREDICTORS.get(name)
    if len(tasks) < 2:
        raise MtbioError("a transfer predictor needs at least two tasks (--tasks a,b,... or --domain D)")
    adapter = config.adapter_spec()[0]
    if adapter != "none" and name in JOINT_PREDICTORS:
        raise MtbioError(f"affinity --adapter {adapter}: with an adapter per task no trained weight is shared, "
                         "so one task's step cannot move another's loss; measure affinities with full training")
    if processes(config).num_processes > 1:
        raise MtbioError("affinity runs in one process (the measurement is not distributed); run it without "
                         "accelerate launch")
    data_dir = data_dir_for(config)
    check_data(tasks, data_dir)
    assert data_dir is not None
    result = predict(PredictionJob(config, tasks, data_dir, directory, echo))
    for path in write_affinity(directory, result):
        echo(f"written: {path}")
    return result


def affinity(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any]]:
    """Predict the relations of the tasks (resuming the joint runs of lookahead and cosine); returns
    the directory and affinity.json's content."""
    refuse_adaptive_seeds(config, "affinity")
    tasks = resolve_tasks(config, catalog_for(config))
    name = config.predictor_spec()[0]
    folder = "affinity" if name in JOINT_PREDICTORS else f"affinity-{name}"
    directory = study("affinity").sweep_dir(config, task_label(config, tasks), folder)
    return directory, predict_relations(config, tasks, directory, echo)
