"""mtbio: multi-task learning on biomedical and clinical text.

Layers, each importing only from those before it (ARCHITECTURE.md; tests/test_architecture.py):
task definitions (`mtbio.tasks`) → readers and featurization (`mtbio.data`) → metrics
(`mtbio.evaluation`) → shared encoder and heads (`mtbio.model`) → training loop (`mtbio.training`)
→ tables, verdicts and plots (`mtbio.reporting`) → stages and sweeps (`mtbio.experiments`) → CLI.
This module is the public facade on top (`mtbio.load`).
"""
from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mtbio.data.in_memory import DatasetTask
    from mtbio.experiments.predict import LoadedRun


def load(run_dir: Any, precision: str = "auto") -> "LoadedRun":
    """Load a run directory (encoder + heads) for prediction. Never unpickles. `precision`: `auto`
    (the run's training precision where the hardware has it), `no` (fp32) or `bf16`."""
    from mtbio.experiments.predict import load_run

    return load_run(run_dir, precision)


def task_from_dataset(dataset: Any, name: str, type: str, columns: dict[str, str], metric: str,
                      **fields: Any) -> "DatasetTask":
    """A `datasets.Dataset`/`DatasetDict` in memory as a task every command trains: its splits are
    written as parquet with a `format: hf` definition; pass `task.task_defs` and `task.data_dir` to
    the commands (`--task-defs`, `--data-dir`). See `mtbio.data.in_memory.task_from_dataset`."""
    from mtbio.data.in_memory import task_from_dataset as make

    return make(dataset, name, type, columns, metric, **fields)


def select_partners(target: str, candidates: str | list[str], top: int = 3, predictor: str = "cosine",
                    verify: bool = True, **options: Any) -> dict[str, Any] | None:
    """`mtbio select` from Python: rank `candidates` (task names, or one domain) for `target` with `predictor`,
    verify the `top` best as pairs (unless `verify` is False) and compare the target trained with the selected
    partners, alone and with every candidate. `options` are run options by name (seeds=2, data_dir=...,
    output=...). Returns select.json's content (None for a dry run)."""
    from mtbio.experiments.select import select
    from mtbio.training.config import build_config

    names = [candidates] if isinstance(candidates, str) else list(candidates)
    config = build_config({}, {"target": [target], "candidates": names, "top": top, "predictor": predictor,
                               "verify": verify, **options})
    return select(config)[1]
