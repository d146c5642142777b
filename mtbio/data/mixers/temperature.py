"""`temperature`: each step draws a task with p ∝ min(n, cap) ** (1 / T) (n = its examples). The
epoch has as many steps as `proportional`; a task drawn more often than it has batches cycles
through reshuffled passes, one drawn less often sees a random subset without repeats."""
from __future__ import annotations

import numpy as np
from pydantic import Field

from mtbio.data.mixer import Batch, MixerOptions, MultiTaskBatchSampler, register_mixer


class TemperatureOptions(MixerOptions):
    temperature: float = Field(2.0, gt=0, description="T in p ∝ n^(1/T)")
    cap: int | None = Field(None, ge=1, description="cap on a task's size")


def temperature_probabilities(sampler: MultiTaskBatchSampler) -> np.ndarray:
    sizes = np.array([len(sampler.lengths[t]) for t in sampler.tasks], dtype=np.float64)
    if sampler.options.cap is not None:
        sizes = np.minimum(sizes, sampler.options.cap)
    weights = sizes ** (1.0 / sampler.options.temperature)
    return weights / weights.sum()


@register_mixer("temperature", options=TemperatureOptions, shuffle_plan=False)
def temperature(sampler: MultiTaskBatchSampler, epoch: int) -> list[Batch]:
    """Each step draws a task with p ∝ min(n, cap) ** (1 / T)."""
    return sampler.draw_tasks(epoch, temperature_probabilities(sampler))
