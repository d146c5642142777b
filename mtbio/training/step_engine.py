"""The step engine: one optimizer step of the training loop over a list of micro-batches.

Each micro-batch runs forward and backward under Accelerate's autocast (as --sub-batches
length-sorted parts when asked), with DDP's gradient sync only after the step's last backward
(gradient accumulation); then clipping and the optimizer and schedule step. Losses stay on the
device in a `LossQueue` until `read_losses` (the first non-finite one stops the run, naming its
batch); with --skip-nonfinite a non-finite batch drops its step instead. The counters a step
advances (examples, tokens, seconds, skipped batches) are those of the `TrainerState` it is
handed: the run controller (`mtbio.training.trainer`) keeps that state and decides when to step,
read, evaluate and save.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from collections.abc import Collection
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator, DistributedType

from mtbio.data.collate import pad_multiple_for, to_device
from mtbio.data.mixer import shard, split_by_length
from mtbio.data.pipeline import TaskData
from mtbio.errors import MtbioError
from mtbio.model.multitask import MultiTaskModel
from mtbio.training.config import RunConfig
from mtbio.training.curves import TrainingCurves
from mtbio.training.distributed import all_processes, log_micro_batch, min_over_processes
from mtbio.training.loss_queue import LossQueue, first_non_finite
from mtbio.training.state import TrainerState

log = logging.getLogger(__name__)

MicroBatch = tuple[str, list[int]]  # (task, indices into its train split)


def loss_units(model: MultiTaskModel, data: dict[str, TaskData]) -> dict[str, np.ndarray]:
    """Per task and train example, the terms it adds to its head's mean loss (labelled tokens for
    tagging): --sub-batches weighs each part by these, so that the parts' losses add up to the batch's."""
    return {name: np.asarray([model.heads[name].loss_units(label) for label in d.splits["train"].columns["labels"]],
                             dtype=np.float64)
            for name, d in data.items()}


@dataclass(frozen=True)
class StepOptions:
    """The run options an optimizer step reads (the engine receives these, not the run's whole config)."""

    max_grad_norm: float
    grad_accum: int
    sub_batches: int
    skip_nonfinite: bool
    pad_multiple: int | None

    @classmethod
    def of(cls, config: RunConfig) -> "StepOptions":
        return cls(config.max_grad_norm, config.grad_accum, config.sub_batches, config.skip_nonfinite,
                   config.pad_multiple)


class StepEngine:
    """Optimizer steps of `model` (as prepared by `accelerator`) on the train splits of `data`.

    `packed`: the tasks whose batches run as packed rows (`position_offset`: their first position id).
    The optimizer and scheduler are stepped here; the scheduler once per optimizer step, skipped or not.
    """

    def __init__(self, model: Any, optimizer: Any, scheduler: Any, data: dict[str, TaskData], options: StepOptions,
                 accelerator: Accelerator, pad_id: int, packed: Collection[str], position_offset: int):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.data = data
        self.options = options
        self.accelerator = accelerator
        self.pad_id = pad_id
        self.pad_multiple = options.pad_multiple or pad_multiple_for(accelerator.device,
                                                                  accelerator.mixed_precision)
        self.packed = set(packed)
        self.position_offset = position_offset
        self.loss_units = loss_units(accelerator.unwrap_model(model), data) if options.sub_batches > 1 else {}
        self.losses = LossQueue()
        self.last_loss: float | None = None  # mean loss of the steps up to the last host read
        self.curves = TrainingCurves()  # losses and gradient norms since the last metrics.jsonl record

    def step(self, micro: list[MicroBatch], state: TrainerState) -> str:
        """The optimizer step after `state.global_step`, over the micro-batches `micro`; returns the
        last one's task. Its seconds, examples and tokens (and a skipped batch) go into `state`."""
        start = time.perf_counter()
        skipped = False
        for i, (task, indices) in enumerate(micro):
            if not self._train_step(task, indices, sync=i == len(micro) - 1, state=state):
                skipped = True  # non-finite loss with --skip-nonfinite: drop the whole optimizer step
                break
        if not skipped:
            norm = self._clip_gradients()
            if norm is not None:
                self.curves.add_grad_norm(norm)
            self.optimizer.step()
        self.scheduler.step()  # the schedule follows the step count, skipped or not
        self.optimizer.zero_grad(set_to_none=True)
        state.train_seconds += time.perf_counter() - start
        return micro[-1][0]

    def _clip_gradients(self) -> torch.Tensor | None:
        """Clip the gradients to --max-grad-norm; returns their norm before clipping. Accelerate's clipping
        multiplies every gradient by the clamped coefficient, even when it is 1, to spare a GPU a host read;
        on a CPU the read is free, so plain CPU runs skip that pass (a no-op: x * 1.0 == x) when nothing is
        clipped (about 3.5 ms of a 0.59 s BC5CDR-chem bf16 step on one thread, whose gradients are rarely clipped)."""
        acc = self.accelerator
        if acc.device.type != "cpu" or acc.distributed_type not in (DistributedType.NO, DistributedType.MULTI_CPU) \
                or acc.scaler is not None:
            return acc.clip_grad_norm_(self.model.parameters(), self.options.max_grad_norm)
        parameters = [p for p in self.model.parameters() if p.grad is not None]
        if not parameters:
            return None
        norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
        # torch's coefficient, to the bit: NaN or infinite norms still go through (and poison the step as in torch)
        if float(torch.clamp(self.options.max_grad_norm / (norm + 1e-6), max=1.0)) != 1.0:
            torch.nn.utils.clip_grads_with_norm_(parameters, self.options.max_grad_norm, norm)
        return norm

    def _train_step(self, task: str, indices: list[int], sync: bool, state: TrainerState) -> bool:
        """Forward and backward of one batch (run as --sub-batches length-sorted parts whose losses
        add up to the batch's), its loss queued for a later host read; False when --skip-nonfinite
        skipped it. `sync`: the gradients are all-reduced after this batch's last backward (the
        last batch of an optimizer step)."""
        acc = self.accelerator
        part = self.data[task].splits["train"]
        local = shard(indices, acc.process_index, acc.num_processes)
        step = state.global_step + 1
        log_micro_batch(acc, step, task, [part.examples[i].uid for i in local])
        # the same number of parts on every process: each runs the same collectives and backwards
        parts = min(self.options.sub_batches, max(1, len(indices) // acc.num_processes))
        chunks = split_by_length(local, part.lengths, parts) if parts > 1 else [local]
        total: torch.Tensor | None = None
        for j, chunk in enumerate(chunks):
            last = sync and j == len(chunks) - 1
            with contextlib.nullcontext() if last else acc.no_sync(self.model):
                batch = to_device(self.collate(task, part, chunk), acc.device)
                with acc.autocast():
                    out = self.model(task, **batch)
                loss = out.loss if len(chunks) == 1 else out.loss * self._share_of_batch(task, chunk, local)
                # --skip-nonfinite must decide before the update (a host read per batch), on all
                # processes together: one rank's NaN skips the batch on every rank
                if self.options.skip_nonfinite and not all_processes(acc, bool(torch.isfinite(loss.detach()).item())):
                    self._skip_batch(state, step, task, indices)
                    acc.backward(loss * 0.0)  # completes DDP's gradient sync for this forward; discarded below
                    self.optimizer.zero_grad(set_to_none=True)
                    return False
                acc.backward(loss / self.options.grad_accum)
            total = loss.detach() if total is None else total + loss.detach()
            state.tokens_seen += sum(part.lengths[i] for i in chunk) * acc.num_processes
            state.token_squares_seen += sum(part.lengths[i] ** 2 for i in chunk) * acc.num_processes
        self.losses.add(step, task, indices, total)
        state.examples_seen += len(indices)
        return True

    def read_losses(self, state: TrainerState) -> None:
        """Read the queued losses on the host (one transfer) and stop at the first non-finite one.

        Its time counts as training time (into `state`): it is the wait for the device to finish
        the queued steps. With several processes the first non-finite loss of any process stops them all.
        """
        if not len(self.losses):  # the same on every process: they queue the same micro-batches
            return
        start = time.perf_counter()
        entries, values = self.losses.read()
        state.train_seconds += time.perf_counter() - start
        bad = min_over_processes(self.accelerator, first_non_finite(values))
        if bad < len(entries):
            entry = entries[bad]
            raise MtbioError(f"{self.describe_batch(entry.step, entry.task, entry.indices)}; check these examples' "
                             "labels, lower --lr, or pass --skip-nonfinite")
        self.last_loss = sum(values) / len(values)
        self.curves.add_losses(entries, values)

    def collate(self, task: str, part: Any, chunk: list[int]) -> dict[str, torch.Tensor]:
        """The rows `chunk` of `part` as the training step feeds them (packed rows for packed tasks)."""
        if task in self.packed:
            return part.packed_batch(chunk, self.pad_id, self.position_offset, self.pad_multiple)
        return part.batch(chunk, self.pad_id, self.pad_multiple)

    def describe_batch(self, step: int, task: str, indices: list[int]) -> str:
        uids = self._uids(task, indices)
        return f"non-finite loss at step {step}, task '{task}', batch of {len(uids)} examples starting with {uids[:5]}"

    def _share_of_batch(self, task: str, chunk: list[int], local: list[int]) -> float:
        """The part's share of the batch's loss terms: its mean loss times this adds up to the batch's."""
        units = self.loss_units[task]
        return float(units[chunk].sum() / units[local].sum())

    def _uids(self, task: str, indices: list[int]) -> list[str]:
        examples = self.data[task].splits["train"].examples
        return [examples[i].uid for i in indices]

    def _skip_batch(self, state: TrainerState, step: int, task: str, indices: list[int]) -> None:
        """--skip-nonfinite: log and record (in `state`) the batch that is skipped."""
        log.warning("skipped a batch: %s", self.describe_batch(step, task, indices))
        state.skipped.append({"step": step, "task": task, "uids": self._uids(task, indices)})
