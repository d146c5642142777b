"""--sub-batches: a batch run as length-sorted parts trains exactly as the whole batch does."""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from mtbio.experiments.refine import refine
from mtbio.training.config import RunConfig

TASKS = {"bc5cdr-chem": "chem0", "ddi": "ddi0"}  # a token-mean loss (tagging) and an example-mean loss


def test_sub_batches_give_the_weights_of_whole_batches(tmp_path: Path, data_dir: Path, tiny_encoder_no_dropout: str,
                                                       task_defs_without_dropout) -> None:
    common = dict(tasks=list(TASKS.values()), task_defs=[str(task_defs_without_dropout(TASKS))], data_dir=str(data_dir),
                  encoder=tiny_encoder_no_dropout, max_train_examples=48, batch_size=16, max_steps=4, save_every=4,
                  max_length=64, seed=5, bucket_window=1)
    runs = {}
    for parts in (1, 4):
        run_dir, results = refine(RunConfig(output=str(tmp_path / f"parts-{parts}"), sub_batches=parts, **common))
        runs[parts] = (load_file(str(run_dir / "checkpoints" / "step-00000004" / "model.safetensors")), results)
    (whole, whole_results), (split, split_results) = runs[1], runs[4]
    for key in whole:
        torch.testing.assert_close(split[key], whole[key], rtol=1e-4, atol=2e-6, msg=key)
    initial = load_file(str(Path(tiny_encoder_no_dropout) / "model.safetensors"))
    moved = sum(not torch.equal(whole[f"encoder.{k}"], v) for k, v in initial.items() if f"encoder.{k}" in whole)
    assert moved > 10  # training really changed the encoder, so equal weights mean equal updates
    assert split_results["steps"] == whole_results["steps"] == 4
