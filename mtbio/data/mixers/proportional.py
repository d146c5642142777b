"""`proportional` (the default; MT-DNN / MT-BERT Algorithm 1): every batch of every task once, all
merged and shuffled."""
from __future__ import annotations

from mtbio.data.mixer import Batch, MultiTaskBatchSampler, register_mixer


@register_mixer("proportional")
def proportional(sampler: MultiTaskBatchSampler, epoch: int) -> list[Batch]:
    """Every batch of every task once."""
    return [(t, b) for t in sampler.tasks for b in sampler.task_pass(t, epoch)]
