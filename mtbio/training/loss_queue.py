"""Training losses kept on the device until the host needs them.

Reading a loss on the host (`.item()`, `float()`) makes the host wait for every kernel queued on
the GPU, so a read after each step leaves the GPU idle while the host collates the next batch and
launches its kernels. The step engine queues each micro-batch's loss here, and the trainer has the
queue read in one transfer every few steps (`read_interval`), and always before anything that must
not see non-finite weights: evaluation, a checkpoint, the end of training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Steps between host reads of the losses on a GPU. On a CPU the ops run synchronously, so a read
# costs nothing and every step is read (the progress bar shows each step's loss).
GPU_READ_INTERVAL = 16


def read_interval(device: torch.device) -> int:
    """Optimizer steps between host reads of the queued losses on `device`."""
    return GPU_READ_INTERVAL if device.type == "cuda" else 1


@dataclass(frozen=True)
class QueuedLoss:
    """One micro-batch's loss (a 0-d device tensor) and what it was computed on."""

    step: int
    task: str
    indices: list[int]
    loss: torch.Tensor


class LossQueue:
    """Micro-batch losses waiting to be read on the host, in training order."""

    def __init__(self) -> None:
        self._queued: list[QueuedLoss] = []

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, step: int, task: str, indices: list[int], loss: torch.Tensor) -> None:
        self._queued.append(QueuedLoss(step, task, indices, loss.detach()))

    def read(self) -> tuple[list[QueuedLoss], list[float]]:
        """Empty the queue with one host transfer: its entries and their loss values."""
        queued, self._queued = self._queued, []
        if not queued:
            return [], []
        return queued, torch.stack([q.loss.float() for q in queued]).tolist()


def first_non_finite(values: list[float]) -> int:
    """Position of the first non-finite value (len(values) when all are finite)."""
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), len(values))
