"""Options that must not change training: a batch run as length-sorted parts (--sub-batches), as
packed rows (--packing) or through a compiled encoder (--compile) ends with the weights of the
whole, unpacked batch in eager mode."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from mtbio.data.pipeline import SplitData
from mtbio.errors import MtbioError
from mtbio.experiments.refine import refine
from mtbio.model.encoder import checkpoint_layers
from mtbio.training.config import RunConfig

# a token-mean loss (tagging, packed by default) beside an example-mean loss (never packed)
TASKS = {"bc5cdr-chem": "chem0", "ddi": "ddi0"}


def _four_steps(tmp_path: Path, data_dir: Path, encoder: str, defs: Path, label: str,
                **option: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Weights after 4 steps of random batches (dropout off), and the run's results."""
    run_dir, results = refine(RunConfig(
        output=str(tmp_path / label), tasks=list(TASKS.values()), task_defs=[str(defs)], data_dir=str(data_dir),
        encoder=encoder, max_train_examples=48, batch_size=16, max_steps=4, save_every=4, seed=5, bucket_window=1,
        **{"max_length": 64, **option}))
    return load_file(str(run_dir / "checkpoints" / "step-00000004" / "model.safetensors")), results


def _assert_same_updates(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], encoder: str,
                         atol: float = 2e-6) -> None:
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=atol, msg=key)
    initial = load_file(str(Path(encoder) / "model.safetensors"))
    moved = sum(not torch.equal(expected[f"encoder.{k}"], v) for k, v in initial.items())
    assert moved > 10  # training really changed the encoder, so equal weights mean equal updates


def test_sub_batches_give_the_weights_of_whole_batches(tmp_path: Path, data_dir: Path, tiny_encoder_no_dropout: str,
                                                       task_defs_without_dropout) -> None:
    defs = task_defs_without_dropout(TASKS)
    whole, whole_results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "parts-1", sub_batches=1)
    split, split_results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "parts-4", sub_batches=4)
    _assert_same_updates(split, whole, tiny_encoder_no_dropout)
    assert split_results["steps"] == whole_results["steps"] == 4


def test_packed_training_gives_the_weights_of_unpacked_batches(tmp_path: Path, data_dir: Path,
                                                               tiny_encoder_no_dropout: str,
                                                               task_defs_without_dropout,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    packed_rows = []
    original = SplitData.packed_batch

    def counting(self: SplitData, *args: object, **kwargs: object) -> dict[str, torch.Tensor]:
        batch = original(self, *args, **kwargs)
        packed_rows.append(len(batch["input_ids"]))
        return batch

    monkeypatch.setattr(SplitData, "packed_batch", counting)
    defs = task_defs_without_dropout(TASKS)
    unpacked, unpacked_results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "unpacked",
                                             packing=False)
    assert not packed_rows
    packed, packed_results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "packed", packing=True)
    assert packed_rows and sum(packed_rows) < 16 * len(packed_rows)  # chem0's batches ran packed: fewer rows
    assert packed_results["packed_tasks"] == ["chem0"] and unpacked_results["packed_tasks"] == []
    _assert_same_updates(packed, unpacked, tiny_encoder_no_dropout)
    assert packed_results["steps"] == unpacked_results["steps"] == 4


def test_compiled_encoder_trains_as_the_eager_one(tmp_path: Path, data_dir: Path, tiny_encoder_no_dropout: str,
                                                  task_defs_without_dropout, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile's graph capture and compiled backward as the trainer applies them, with the aot_eager backend:
    inductor's C++ code generation took a minute on a fresh CI machine, and its kernels are torch's to test."""
    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile",
                        lambda self, *args, **kwargs: compile_module(self, *args, backend="aot_eager", **kwargs))
    defs = task_defs_without_dropout(TASKS)
    # 16 tokens: every text is cut to the same width, so every batch has one shape and is compiled once
    eager, _ = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "eager", max_length=16)
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled, results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "compiled", compile=True,
                                    max_length=16)
    assert counters["stats"]["unique_graphs"] > 0  # the encoder really ran compiled
    assert set(compiled) == set(eager)  # compiling in place keeps the parameter names (and so the saved files)
    _assert_same_updates(compiled, eager, tiny_encoder_no_dropout, atol=1e-5)  # fused kernels round differently
    assert results["packed_tasks"] == ["chem0"] and results["steady_after_steps"] == 1
    assert results["steady_train_examples_per_second"] > 0


def test_activation_checkpointing_gives_the_weights_of_a_plain_run(tmp_path: Path, data_dir: Path, tiny_encoder: str,
                                                                  task_defs_without_dropout,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropout on: the recomputed forward pass draws the same masks, in eager attention and in the lean path (here
    from 1 key on), so the updates are the plain run's; each layer's attention ran twice a training step."""
    from mtbio.model import cpu_dropout

    calls: list[bool] = []
    attention = cpu_dropout._attention

    def counting(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        calls.append(module.training)
        return attention(module, *args, **kwargs)

    monkeypatch.setattr(cpu_dropout, "_attention", counting)
    defs = task_defs_without_dropout(TASKS)
    for lean_from in (129, 1):
        monkeypatch.setattr(cpu_dropout, "LEAN_FROM_LENGTH", lean_from)
        calls.clear()
        plain, _ = _four_steps(tmp_path, data_dir, tiny_encoder, defs, f"plain-{lean_from}")
        plain_calls = sum(calls)
        calls.clear()
        checkpointed, _ = _four_steps(tmp_path, data_dir, tiny_encoder, defs, f"checkpointed-{lean_from}",
                                      activation_checkpointing=1)
        assert plain_calls > 0 and sum(calls) == 2 * plain_calls  # every training forward of a layer recomputed
        _assert_same_updates(checkpointed, plain, tiny_encoder)
    with pytest.raises(MtbioError, match="does not support recomputing"):
        checkpoint_layers(torch.nn.Linear(2, 2))


def test_padding_to_a_multiple_gives_the_weights_of_unrounded_batches(tmp_path: Path, data_dir: Path,
                                                                      tiny_encoder_no_dropout: str,
                                                                      task_defs_without_dropout,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from mtbio.training.step_engine import StepEngine

    widths: list[int] = []  # of the training batches, bucketed (ddi0) and packed (chem0)
    original = StepEngine.collate

    def recording(self: StepEngine, *args: Any) -> dict[str, torch.Tensor]:
        batch = original(self, *args)
        widths.append(batch["input_ids"].shape[1])
        return batch

    monkeypatch.setattr(StepEngine, "collate", recording)
    defs = task_defs_without_dropout(TASKS)
    plain, _ = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "unrounded", max_length=100)
    assert any(width % 16 for width in widths)  # the default on a CPU: widths as they come
    widths.clear()
    rounded, results = _four_steps(tmp_path, data_dir, tiny_encoder_no_dropout, defs, "rounded", max_length=100,
                                   pad_multiple=16)
    assert widths and all(width % 16 == 0 for width in widths)
    _assert_same_updates(rounded, plain, tiny_encoder_no_dropout)
    assert results["steps"] == 4
