"""Task embeddings without a joint run, compared by cosine (`cosine_matrix`):

- text: the mean over a sample of a task's training inputs of their mean-pooled last-layer
  embeddings (`mtbio.model.probes.embed`; a pair encoded together, a tagged sentence as its words);
- Fisher (TaskEmb, Vu et al., EMNLP 2020): the diagonal of the empirical Fisher information of the
  encoder's weights, the squared gradient of each sampled training example's loss (its gold label)
  averaged, taken after a short training of the task's new head with the encoder frozen.

Both run in eval mode (no dropout): an embedding depends only on the encoder, the data and the seed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from mtbio.data.example import Example
from mtbio.data.pipeline import SplitData
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.probes import embed

HEAD_LR = 1e-2  # the head's learning rate before the Fisher is taken (a new layer on frozen features)


def text_embedding(encoder: Any, tokenizer: Any, examples: Sequence[Example],
                   max_length: int) -> dict[str, torch.Tensor]:
    """{"text": the mean pooled embedding of `examples`} (the form `cosine_matrix` compares)."""
    texts = [ex.text if ex.text is not None else " ".join(ex.tokens or []) for ex in examples]
    pairs = [ex.text_b or "" for ex in examples] if any(ex.text_b is not None for ex in examples) else None
    rows = embed(encoder, tokenizer, texts, pairs, max_length=max_length)
    return {"text": torch.from_numpy(rows.mean(0))}


def fisher_embedding(model: MultiTaskModel, task: str, train: SplitData, pad_token_id: int, head_steps: int,
                     batch_size: int, examples: int, seed: int) -> dict[str, torch.Tensor]:
    """{encoder parameter name: its diagonal Fisher} on `task` (module docstring); `model` holds the
    task's new head. The encoder's weights are not changed."""
    rng = np.random.default_rng(seed)
    encoder = dict(model.encoder.named_parameters())
    was_training, wanted = model.training, {name: p.requires_grad for name, p in encoder.items()}
    model.eval()
    try:
        for param in encoder.values():
            param.requires_grad_(False)
        head = [p for p in model.heads[task].parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(head, lr=HEAD_LR)
        for _ in range(head_steps):
            chosen = rng.choice(len(train), size=min(batch_size, len(train)), replace=False)
            loss = model(task, **train.batch(sorted(chosen.tolist()), pad_token_id)).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for param in encoder.values():
            param.requires_grad_(True)
        fisher = {name: torch.zeros_like(p) for name, p in encoder.items()}
        sample = sorted(rng.choice(len(train), size=min(examples, len(train)), replace=False).tolist())
        for index in sample:
            loss = model(task, **train.batch([index], pad_token_id)).loss
            found = torch.autograd.grad(loss, list(encoder.values()), allow_unused=True)
            for name, grad in zip(encoder, found):
                if grad is not None:
                    fisher[name] += grad.detach() ** 2
        return {name: value / len(sample) for name, value in fisher.items()}
    finally:
        for name, param in encoder.items():
            param.requires_grad_(wanted[name])
        model.train(was_training)
