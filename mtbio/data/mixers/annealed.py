"""`annealed`: MT-DNN's annealed sampling (Stickland & Murray, 2019, "BERT and PALs", section 4).

Each step draws a task with p ∝ n ** α (n = its training examples), α falling linearly from 1 (proportional to size) to `anneal_to` over the run, so
that late in training the tasks are seen more equally and the large ones stop dominating:

- `per: epoch` (the paper's schedule): α_e = 1 − (1 − anneal_to) · e / (E − 1) in epoch e of E;
- `per: step`: α_t = 1 − (1 − anneal_to) · t / (T − 1) at batch t of T.

E and T come from the run's length (`sampler.run_batches`: `--max-steps` when given, else `--epochs`),
never from `--epochs` alone; a run of one epoch (E = 1) stays at α = 1 with `per: epoch`. An epoch has
as many steps as `proportional`; a task drawn more often than it has batches cycles through
reshuffled passes. YAML: `mixer: {name: annealed, anneal_to: 0.5}`; `--mixer annealed` takes the defaults.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from mtbio.data.mixer import Batch, MixerOptions, MultiTaskBatchSampler, register_mixer


class AnnealedOptions(MixerOptions):
    anneal_to: float = Field(0.2, ge=0, le=1, description="α at the end of the run (0: uniform, 1: proportional)")
    per: Literal["epoch", "step"] = Field("epoch", description="α changes once an epoch (the paper) or every batch")


def alphas(sampler: MultiTaskBatchSampler, epoch: int) -> np.ndarray:
    """α at each step of `epoch`'s plan (one value per batch)."""
    options, steps = sampler.options, len(sampler)
    if options.per == "epoch":
        epochs = math.ceil(sampler.run_batches / steps)
        progress = np.full(steps, min(epoch / (epochs - 1), 1.0) if epochs > 1 else 0.0)
    else:
        batch = epoch * steps + np.arange(steps)
        progress = np.minimum(batch / (sampler.run_batches - 1), 1.0) if sampler.run_batches > 1 else np.zeros(steps)
    return 1.0 - (1.0 - options.anneal_to) * progress


def probabilities(sampler: MultiTaskBatchSampler, epoch: int) -> np.ndarray:
    """Each step's task probabilities, p ∝ n ** α (steps × tasks)."""
    sizes = np.array([len(sampler.lengths[t]) for t in sampler.tasks], dtype=np.float64)
    weights = sizes[None, :] ** alphas(sampler, epoch)[:, None]
    return weights / weights.sum(axis=1, keepdims=True)


@register_mixer("annealed", options=AnnealedOptions, shuffle_plan=False, uses_run_length=True)
def annealed(sampler: MultiTaskBatchSampler, epoch: int) -> list[Batch]:
    """Each step draws a task with p ∝ n ** α, α annealed from 1 to `anneal_to` over the run."""
    p = probabilities(sampler, epoch)
    return sampler.draw_tasks(epoch, p[0] if sampler.options.per == "epoch" else p)
