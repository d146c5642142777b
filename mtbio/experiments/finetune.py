"""MT-BERT-Fine-Tune (from a refined run) and the single-task baseline (from a plain encoder).

Both are the same code path: one task trained alone. From a refined run the encoder comes from
`<run>/encoder`, the task's head from `<run>/heads/<task>` (`--finetune-heads new`: a new head) and
the default learning rate is the smaller fine-tuning one (seed 004 section 4.2); without `--from` it
is the single-task baseline, with a new head, at the refine rate.
With `--seeds K` each task is fine-tuned K times (seeds seed … seed+K−1) into `<base>/<task>/seed-<s>/`.
With `--resume`, a finished run with no checkpoint left to continue from (a study's committed small files) is
kept as it is, not trained again; one with a checkpoint resumes from it (and so can be extended with more steps).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.experiments.common import data_dir_for, resolve_tasks
from mtbio.experiments.training_run import train_tasks
from mtbio.training.checkpoint import latest_checkpoint
from mtbio.training.config import FINETUNE_LR, REFINE_LR, RunConfig
from mtbio.run_dir import RunDir, saved_cell


def _finished_for_good(run_dir: Path) -> bool:
    """A finished run that --resume cannot continue: its results are all there is (its weights are gone; or its
    folder too, the run kept in a study's cells.jsonl)."""
    return saved_cell(run_dir) is not None and latest_checkpoint(RunDir(run_dir).checkpoints_dir) is None


def finetune(config: RunConfig) -> list[tuple[Path, dict[str, Any]]]:
    """Fine-tune each task separately; returns (run directory, results) per task."""
    tasks = resolve_tasks(config)
    if config.from_run:
        source_dir = Path(config.from_run)
        if not (RunDir(source_dir).encoder_dir / "config.json").is_file():
            raise MtbioError(f"--from {source_dir}: not an mtbio run directory (no encoder/config.json)")
        if config.encoder:
            raise MtbioError("give either --from RUN_DIR (fine-tune a refined encoder) or --encoder, not both")
        base = Path(config.output) if config.output else source_dir / "finetune"
        stage, lr = "finetune", config.learning_rate(FINETUNE_LR)
    else:
        base = Path(config.output) if config.output else Path("runs") / "single-task"
        stage, lr = "single-task", config.learning_rate(REFINE_LR)
    runs = []
    for task in tasks:
        encoder_source, heads = config.encoder, None
        if config.from_run:  # the refined run's weights; a --select per-task run's own best for this task
            source = RunDir(RunDir(config.from_run).model_dir_for(task.name))
            encoder_source = str(source.encoder_dir)
            heads = source.heads_dir if config.finetune_heads == "refined" else None
        own = config.model_copy(update={"tasks": [task.name], "domain": None})  # each run's config.yaml: its task
        if config.seeds and config.seeds > 1:  # --seeds K: <base>/<task>/seed-<s>/ for s = seed .. seed+K-1
            plan = [(base / task.name / f"seed-{seed}", own.model_copy(update={"seed": seed}))
                    for seed in range(config.seed, config.seed + config.seeds)]
        else:
            plan = [(base / (task.name if config.from_run or config.output else f"{task.name}-seed{config.seed}"),
                     own)]
        for run_dir, run_config in plan:
            if config.resume and _finished_for_good(run_dir):
                runs.append((run_dir, (saved_cell(run_dir) or RunDir(run_dir)).results()))
            else:
                runs.append((run_dir, train_tasks([task], run_config, run_dir, encoder_source, lr, stage,
                                                  data_dir_for(config), heads)))
    return runs
