"""MT-BERT-Refinement: train the shared encoder on several tasks at once (seed 004 section 3.5.2)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.experiments.common import data_dir_for, default_run_name, resolve_tasks
from mtbio.experiments.training_run import train_tasks
from mtbio.training.config import REFINE_LR, RunConfig


def refine(config: RunConfig) -> tuple[Path, dict[str, Any]]:
    """Refine `config.encoder` on the tasks; returns the run directory and its results."""
    if config.seeds and config.seeds > 1:
        raise MtbioError("--seeds: refine trains one run; give --seed, or use finetune --seeds K")
    tasks = resolve_tasks(config)
    run_dir = Path(config.output) if config.output else Path("runs") / "refine" / default_run_name(tasks, config)
    results = train_tasks(tasks, config, run_dir, config.encoder, config.learning_rate(REFINE_LR), "refine",
                          data_dir_for(config))
    return run_dir, results
