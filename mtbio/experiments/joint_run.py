"""The joint refinement run of every seed that the lookahead and cosine predictors measure, as sweep cells.

    <dir>/
        sweep.json                      the training options and the measurement settings (checked on rerun)
        cells.json                      the cells (`mtbio sweep status`)
        seed-<s>/                       an ordinary refine run over all the tasks, plus
        seed-<s>/affinity_points.json   its measurements (`mtbio.training.affinity`), written before results.json

Each seed is a cell of the sweep engine (`mtbio.experiments.sweep`, kind `joint`): claimed with a lock,
run by the launcher (`--launcher`, `--parallel`), skipped once finished, continued from its last checkpoint
(measurements included) when unfinished.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.launchers import launch
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import (Cell, check_protocol, failed_cells, failure_message, processes, protocol,
                                    record_cells, seeds_of)
from mtbio.fileio import write_json
from mtbio.reporting.affinity import build_affinity
from mtbio.run_dir import RunDir, SweepDir, saved_cell
from mtbio.tasks.schema import TaskDef
from mtbio.training.affinity import POINTS_FILE
from mtbio.training.config import REFINE_LR


def measurement(config: StudyConfig) -> dict[str, Any]:
    """The affinity probe's settings as sweep.json records them (the joint predictor's options)."""
    options = config.predictor_spec()[1]
    return {"affinity_every": options.every, "affinity_batch_size": options.batch_size, "affinity_split": options.split}


def check_measurement(directory: Path, config: StudyConfig) -> None:
    """The training options (as a sweep checks them) and the measurement settings must match the saved ones."""
    check_protocol(directory, config)
    path = SweepDir(directory).protocol_file
    saved = json.loads(path.read_text()).get("measurement") if path.is_file() else None
    if saved is not None and saved != measurement(config):
        raise MtbioError(f"{directory} holds runs measured with {saved}; use the same settings or another --output")


def joint_affinity(config: StudyConfig, tasks: list[TaskDef], data_dir: Path, directory: Path, default: str,
                   echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the joint run of every seed; returns affinity.json's content (`default`: the
    predictor its graph shows)."""
    check_measurement(directory, config)
    lr = config.learning_rate(REFINE_LR)
    names = tuple(t.name for t in tasks)
    cells = [Cell("joint", names, seed, directory / f"seed-{seed}", "refine", lr) for seed in seeds_of(config)]
    state = processes(config)
    state.wait_for_everyone()  # every process has read sweep.json before it is written
    if state.is_main_process:
        write_json(SweepDir(directory).protocol_file, {"protocol": protocol(config), "measurement": measurement(config)})
        record_cells(directory, cells)
    if not launch(cells, config, {t.name: t for t in tasks}, data_dir, state, directory, echo):
        raise MtbioError(f"joint runs still running or queued; see mtbio sweep status {directory}, then run the same "
                         "command again")
    failed = failed_cells(cells, config.retries)
    if failed:
        raise MtbioError(failure_message(failed))
    saved = {cell.seed: saved_cell(cell.run_dir) or RunDir(cell.run_dir) for cell in cells}  # dirs or cells.jsonl
    runs = {seed: {"probe": json.loads(run.read_text(POINTS_FILE)), "results": run.results()}
            for seed, run in saved.items()}
    return build_affinity({t.name: t.metric for t in tasks}, runs, config.rule_spec()[1].alpha, default)
