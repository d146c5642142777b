"""The mini-batch mixer strategies, one module each; importing this package registers them all in
`MIXERS` (every module here is imported, so a new strategy is one file that registers itself):

- `proportional` (default; MT-DNN / MT-BERT Algorithm 1): every batch of every task once, shuffled;
- `temperature`: each step draws a task with p ∝ min(n, cap) ** (1 / T); `uniform`: p equal;
- `ratio`: all of `main_task`'s batches plus ratio × as many auxiliary ones;
- `annealed` (MT-DNN's annealed sampling): p ∝ n ** α, α falling from 1 to `anneal_to` over the run.

The sampler itself (batches, bucketing, seeds, resume, sharding) is `mtbio.data.mixer`.
"""
from __future__ import annotations

from mtbio.data.mixer import MIXERS, MixerOptions, MultiTaskBatchSampler, mixer_options, register_mixer
from mtbio.registry import import_modules

import_modules(__name__, __path__)

__all__ = ["MIXERS", "MixerOptions", "MultiTaskBatchSampler", "mixer_options", "register_mixer"]
