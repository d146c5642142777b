"""Training curves: what `metrics.jsonl` records between evaluations, every `--log-every` steps.

Per task, the mean training loss of the micro-batches of that task since the last record; the
learning rate; the mean gradient norm (before clipping) of the optimizer steps since the last
record; and the training throughput over the same span. Gradient norms stay on the device until a
record is written, like the losses (`mtbio.training.loss_queue`).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import torch

from mtbio.training.loss_queue import QueuedLoss


class TrainingCurves:
    """Accumulates losses and gradient norms between two records; `record` empties it."""

    def __init__(self) -> None:
        self._loss: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self._norms: list[torch.Tensor] = []
        self._since = (0, 0.0)  # examples seen, train seconds at the last record

    def add_losses(self, entries: Sequence[QueuedLoss], values: Sequence[float]) -> None:
        for entry, value in zip(entries, values):
            total = self._loss[entry.task]
            total[0] += value
            total[1] += 1

    def add_grad_norm(self, norm: torch.Tensor | float) -> None:
        self._norms.append(norm.detach() if isinstance(norm, torch.Tensor) else torch.tensor(float(norm)))

    def record(self, step: int, epoch: int, lr: float, examples_seen: int, train_seconds: float) -> dict[str, Any]:
        """The metrics.jsonl line for the span since the last record (one host read of the norms)."""
        norms = torch.stack([n.float().cpu() for n in self._norms]).tolist() if self._norms else []
        examples, seconds = examples_seen - self._since[0], train_seconds - self._since[1]
        line = {"step": step, "epoch": epoch, "split": "train",
                "loss": {task: s / n for task, (s, n) in self._loss.items() if n},
                "lr": lr, "grad_norm": sum(norms) / len(norms) if norms else None,
                "examples_per_second": examples / seconds if seconds > 0 else None}
        self._loss.clear()
        self._norms = []
        self._since = (examples_seen, train_seconds)
        return line
