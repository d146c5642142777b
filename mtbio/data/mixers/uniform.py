"""`uniform`: each step draws a task with equal probability (as many steps as `proportional`)."""
from __future__ import annotations

import numpy as np

from mtbio.data.mixer import Batch, MultiTaskBatchSampler, register_mixer


@register_mixer("uniform", shuffle_plan=False)
def uniform(sampler: MultiTaskBatchSampler, epoch: int) -> list[Batch]:
    """Each step draws a task with equal probability."""
    return sampler.draw_tasks(epoch, np.full(len(sampler.tasks), 1.0 / len(sampler.tasks)))
