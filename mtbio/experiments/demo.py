"""`mtbio demo`: refine then fine-tune on the small samples that ship inside the package.

One sample per task type (NER, relation, NLI, similarity, multi-label), written for mtbio in
the real formats, on the packaged MiniLM-L6 encoder: a few minutes on two CPU cores, no data
directory, no network. The table ends with each task's best no-training baseline of the packaged encoder (the
refinement run's `baselines`: a probe on frozen features, a pair's zero-shot cosine) and its trivial score
(majority class, all `O`, empty label set), so a reader sees what every column learned beyond both.

The schedule is the one that makes every column learn in that time: 3 refinement epochs at 3e-4 with the small-data
recipe's settings (each new head fitted on the frozen features first, LP-FT; thresholds fitted on the training
examples; a pair task in the form its probe favours; each task's best evaluation kept for it, `--select per-task`),
then one fine-tuning epoch at 5e-5 that starts from that task's refined weights and keeps them where no evaluation
beats them (its own baselines, of the refined encoder, are not scored: the table's floor is the untrained
encoder's).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mtbio.data.loading import read_split
from mtbio.evaluation.trivial import trivial_scores
from mtbio.experiments.common import resolve_tasks
from mtbio.experiments.evaluate import evaluate_paths
from mtbio.experiments.finetune import finetune
from mtbio.experiments.refine import refine
from mtbio.fileio import write_text
from mtbio.training.config import RunConfig

MARKER = ".mtbio-demo"
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"


def demo_config(**overrides: Any) -> RunConfig:
    values: dict[str, Any] = dict(domain="demo", task_defs=[str(SAMPLE_DIR / "task_defs")], data_dir=str(SAMPLE_DIR),
                                  epochs=2, batch_size=8, lr=3e-4, max_length=48, seed=13,
                                  # the small-data recipe's settings, but its epochs (no step floor) to stay short
                                  min_steps=1, lp_ft=True, thresholds="fit", pair_form="auto")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return RunConfig(**values)


def run_demo(output: Path, encoder: str | None = None, epochs: int | None = None) -> dict[str, Any]:
    """Refine on all demo tasks, fine-tune each from the refined run, score both on dev; the last
    rows of the table are the untrained encoder's best no-training baseline and the trivial predictor's.

    A previous demo in `output` (marked by a `.mtbio-demo` file) is replaced; any other
    existing directory is left alone and refused by the run-directory check.
    """
    if (output / MARKER).is_file():
        shutil.rmtree(output)
    write_text(output / MARKER, "created by `mtbio demo`; safe to delete\n")
    # each task's own best refined weights (its LP-FT start among them) are what its fine-tune starts from
    refine_dir, refined = refine(demo_config(output=str(output / "refine"), encoder=encoder, epochs=epochs,
                                             select_by="per-task"))
    finetune(demo_config(from_run=str(refine_dir), output=str(output / "finetune"), epochs=1, batch_size=16,
                         lr=5e-5, baselines=False))
    table = evaluate_paths([refine_dir, output / "finetune"], "dev", SAMPLE_DIR, rescore=False)
    table["rows"] += [baseline_row(refined, table["tasks"]), trivial_row(demo_config())]
    return table


def baseline_row(results: dict[str, Any], tasks: list[str]) -> dict[str, Any]:
    """A table row of each task's best no-training baseline of the start encoder (a run's results.json)."""
    from mtbio.model.floor import best_baseline

    primary = {}
    for task in tasks:
        metric = next(iter((results.get("dev") or {}).get(task) or {}), None)
        found = best_baseline((results.get("baselines") or {}).get(task) or {}, metric) if metric else None
        if found is not None:
            primary[task] = found[1]
    return {"name": "no training (best baseline)", "stage": "probe/cosine", "primary": primary,
            "average": sum(primary.values()) / len(primary) if primary else None, "blue": None, "blurb": None}


def trivial_row(config: RunConfig) -> dict[str, Any]:
    """A table row of each task's trivial dev score (fitted on its training labels)."""
    primary = {}
    for task in resolve_tasks(config):
        train, dev = (read_split(task, split, SAMPLE_DIR) for split in ("train", "dev"))
        primary[task.name] = trivial_scores(task, train, dev)[task.metric]
    return {"name": "trivial", "stage": "majority/all-O", "primary": primary,
            "average": sum(primary.values()) / len(primary), "blue": None, "blurb": None}
