"""Running a (multi-task) model over a split and decoding its predictions into label space."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

import torch
from tqdm import tqdm

from mtbio.data.collate import pad_multiple_for, to_device
from mtbio.data.featurize import SEGMENT_LENGTHS
from mtbio.data.pipeline import SplitData
from mtbio.errors import MtbioError
from mtbio.logs import bars_enabled
from mtbio.model.multitask import MultiTaskModel

PROGRESS_MIN_EXAMPLES = 1000  # smaller splits finish before a bar would tell anything
INFERENCE_PRECISIONS = ("auto", "no", "bf16")


def bf16_supported(device: torch.device | str) -> bool:
    """bf16 matmuls in hardware: AVX512-BF16 or AMX on a CPU, Ampere or newer on a GPU.

    Not emulated bf16: oneDNN takes bf16 on any AVX512 CPU, but without AVX512-BF16 (a 2-core Xeon, family 6
    model 85) its bf16 matmuls ran at 48 against 163 GFLOP/s in fp32 and training at x0.42 fp32's speed
    (docs/speed.md)."""
    if torch.device(device).type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    native = cpu_has("_is_avx512_bf16_supported") or cpu_has("_is_amx_tile_supported")
    return native and bool(getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)())


def cpu_has(check: str) -> bool:
    """One of torch.cpu's instruction-set checks (`_is_amx_tile_supported`, ...); False where this torch lacks it."""
    return bool(getattr(torch.cpu, check, lambda: False)())


def resolve_inference_precision(precision: str, trained: str | None, device: torch.device | str) -> str:
    """`no` or `bf16`. `auto`: the precision the run was trained and dev-scored in (so scores are
    reproduced; bf16 dev micro F1 is within 0.001 (ChemProt) and 0.006 (DDI) of fp32, see
    benchmarks/bench_eval_precision.py), falling back to fp32 where this hardware has no bf16."""
    if precision not in INFERENCE_PRECISIONS:
        raise MtbioError(f"precision '{precision}': choose one of {', '.join(INFERENCE_PRECISIONS)}")
    if precision == "auto":
        return "bf16" if trained == "bf16" and bf16_supported(device) else "no"
    if precision == "bf16" and not bf16_supported(device):
        raise MtbioError(f"bf16 inference: this {torch.device(device).type} has no bf16 support in hardware; use no")
    return precision


def autocast_for(precision: str, device: torch.device | str) -> Callable[[], ContextManager[Any]] | None:
    """A fresh autocast context per batch for `bf16` (None for `no`)."""
    if precision != "bf16":
        return None
    device_type = torch.device(device).type
    return lambda: torch.autocast(device_type, dtype=torch.bfloat16)


@torch.no_grad()
def predict_shared(model: MultiTaskModel, datas: dict[str, SplitData], pad_token_id: int, batch_size: int = 64,
                   device: torch.device | str = "cpu", autocast: Callable[[], ContextManager[Any]] | None = None,
                   with_scores: bool = False) -> dict[str, list[Any]]:
    """`predict_split` for several tasks whose featurized inputs are the same (`same_encoder_inputs`): each batch is
    encoded once and every task's head reads it. Returns task → predictions, in the examples' order."""
    was_training = model.training
    model.eval()
    tasks = list(datas)
    first = datas[tasks[0]]
    out: dict[str, list[Any]] = {t: [None] * len(first) for t in tasks}
    multiple = pad_multiple_for(device)
    try:
        for indices in first.eval_batches(batch_size):
            batches = {}
            for task in tasks:
                batches[task] = to_device(datas[task].batch(indices, pad_token_id, multiple), torch.device(device))
                batches[task].pop("labels", None)
            with autocast() if autocast else contextlib.nullcontext():
                logits = model.forward_heads(batches)
            for task in tasks:
                for index, prediction in zip(indices, _decoded(model.heads[task], logits[task], batches[task],
                                                               with_scores)):
                    out[task][index] = prediction
    finally:
        model.train(was_training)
    return out


def _decoded(head: Any, logits: torch.Tensor, batch: dict[str, Any], with_scores: bool) -> list[Any]:
    """A batch's predictions in label space, each with its scores when asked."""
    decoded = head.decode(logits, batch)
    return list(zip(decoded, head.scores(logits, batch))) if with_scores else decoded


def same_encoder_inputs(a: SplitData, b: SplitData) -> bool:
    """Whether two featurized splits give the encoder the same inputs, example by example."""
    return len(a) == len(b) and all(a.columns.get(c) == b.columns.get(c) for c in ("input_ids", "token_type_ids", SEGMENT_LENGTHS))


@torch.no_grad()
def predict_split(
    model: MultiTaskModel,
    task: str,
    data: SplitData,
    pad_token_id: int,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    autocast: Callable[[], ContextManager[Any]] | None = None,
    progress: bool = True,
    with_scores: bool = False,
    batches: list[list[int]] | None = None,
) -> list[Any]:
    """Predictions for every example of `data`, in the examples' order (only `batches`' examples when
    given, None elsewhere: a process's share of the split).

    `autocast` makes a fresh mixed-precision context per batch (e.g. `accelerator.autocast`).
    `progress`: a progress bar (examples) on splits of more than PROGRESS_MIN_EXAMPLES examples.
    `with_scores`: each item is (prediction, scores), scores from the head's `scores` (probabilities).
    """
    was_training = model.training
    model.eval()
    head = model.heads[task]
    predictions: list[Any] = [None] * len(data)
    multiple = pad_multiple_for(device)
    batches = list(data.eval_batches(batch_size)) if batches is None else batches
    total = sum(len(b) for b in batches)
    bar = tqdm(total=total, desc=f"predict {task}", unit="ex", leave=False, dynamic_ncols=True,
               disable=not progress or not bars_enabled() or total <= PROGRESS_MIN_EXAMPLES)
    try:
        for indices in batches:
            batch = to_device(data.batch(indices, pad_token_id, multiple), torch.device(device))
            batch.pop("labels", None)
            with autocast() if autocast else contextlib.nullcontext():
                logits = model(task, **batch).logits
            for index, prediction in zip(indices, _decoded(head, logits, batch, with_scores)):
                predictions[index] = prediction
            bar.update(len(indices))
    finally:
        bar.close()
        model.train(was_training)
    return predictions
