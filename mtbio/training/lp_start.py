"""LP-FT's first half (Kumar et al. 2022, *Fine-tuning can distort pretrained features*): before the encoder moves,
fit a new head's output layer on the frozen encoder's features, so that fine-tuning starts from a head that already
reads them instead of from noise that drags the features toward it.

The features are exactly what the head's linear layer reads (its input, caught by a forward hook, in eval mode:
[CLS], the mean of the tokens, the marked entities' vectors, or each word's first sub-word), over the run's
training set. The fit is the no-training probe's: a logistic regression (one per label for multi-label) or a ridge
regression, scikit-learn's defaults, copied into the layer."""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from torch import nn

from mtbio.data.pipeline import SplitData
from mtbio.model.multitask import MultiTaskModel

log = logging.getLogger(__name__)


@torch.no_grad()
def frozen_features(model: MultiTaskModel, task: str, data: SplitData, pad_token_id: int,
                    batch_size: int = 64) -> tuple[np.ndarray, np.ndarray] | None:
    """(what the head's linear layer reads, the labels) over `data`, one row per label; None for a head without
    one linear output layer."""
    out = getattr(model.heads[task], "out", None)
    if not isinstance(out, nn.Linear):
        return None
    caught: list[torch.Tensor] = []
    hook = out.register_forward_hook(lambda _module, inputs, _output: caught.append(inputs[0].detach().float()))
    was_training = model.training
    model.eval()
    features, labels = [], []
    try:
        for indices in data.eval_batches(batch_size):
            batch = data.batch(indices, pad_token_id)
            gold = batch.pop("labels")
            caught.clear()
            model(task, **batch)
            x = caught[0]
            features.append(x.reshape(-1, x.shape[-1]).cpu().numpy())
            labels.append(gold.reshape(features[-1].shape[0], -1).squeeze(-1).cpu().numpy())
    finally:
        hook.remove()
        model.train(was_training)
    return np.concatenate(features).astype(np.float64), np.concatenate(labels)


def fit_heads(model: MultiTaskModel, tasks: dict[str, Any], data: dict[str, SplitData], pad_token_id: int,
              names: list[str]) -> dict[str, bool]:
    """Fit the output layer of each head in `names` on its frozen features (by its kind's probe; a kind without one:
    the head starts as built); {task: fitted}."""
    fitted = {}
    for name in names:
        probe = tasks[name].kind.probe
        found = frozen_features(model, name, data[name], pad_token_id) if probe is not None else None
        out = getattr(model.heads[name], "out", None)
        result = probe.head_weights(*found, out.out_features) if found and out is not None else None
        if result is not None:
            with torch.no_grad():
                out.weight.copy_(torch.as_tensor(result[0], dtype=out.weight.dtype))
                out.bias.copy_(torch.as_tensor(result[1], dtype=out.bias.dtype))
            log.info("%s: head fitted on the frozen encoder's features before fine-tuning (LP-FT)", name)
        fitted[name] = result is not None
    return fitted
