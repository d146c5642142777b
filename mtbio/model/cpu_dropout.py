"""Cheaper dropout masks for training on a CPU.

`torch.nn.functional.dropout` on a CPU draws one Bernoulli sample per element, about 8 ns each
on this project's machine: a fifth of a MiniLM training step, more under bf16. `bit_dropout`
takes each mask element from 16 random bits instead (four per 64-bit draw), which is about five
times cheaper; the keep probability is 1 - p rounded to a multiple of 1/65536.

`use_bit_dropout(encoder, heads)` swaps every `nn.Dropout` for `BitDropout`. Attention-probability
dropout happens inside the attention function, so encoders whose attention goes through Hugging
Face's attention interface with SDPA (BERT, RoBERTa, ELECTRA, …) get `ATTENTION`: in training
with dropout it is eager attention with `bit_dropout`, otherwise plain SDPA. The name lives in
the in-memory config only (transformers does not save it), so saved encoders load anywhere.

On a GPU, where dropout is one fused kernel, nothing is swapped.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

ATTENTION = "mtbio_sdpa_bit_dropout"


def bit_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Dropout with probability `p` whose mask comes from 16 random bits per element."""
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    n = x.numel()
    bits = torch.randint(-2**63, 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=x.device)
    bits = bits.view(torch.int16)[:n].view(x.shape)
    keep = bits >= round(p * 65536) - 32768
    # one mask holding 0 or 1/(1-p): a single product forward and backward (x * 1 * s == x * s exactly)
    return x * keep.to(x.dtype).mul_(1.0 / (1.0 - p))


class BitDropout(nn.Dropout):
    """`nn.Dropout` (same `p`, same place in the module tree) drawing its mask with `bit_dropout`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bit_dropout(x, self.p, self.training)


def _attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
               **kwargs: Any) -> tuple[torch.Tensor, None]:
    """SDPA, except in training with dropout: eager attention with `bit_dropout` on the probabilities
    (SDPA on a CPU computes the same product, with the costly dropout).

    The scale is applied to the queries (head_dim columns) rather than to the scores (one column per
    key), and the mask is added: its backward pass is free, where a `masked_fill` costs a pass over
    the scores. On packed rows of 128 tokens this halves the time of the scores and softmax."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if dropout == 0.0 or not module.training:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    scale = scaling if scaling is not None else query.size(-1) ** -0.5
    scores = torch.matmul(query * scale, key.transpose(2, 3))
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # True: attend
        bias = torch.zeros(attention_mask.shape, dtype=scores.dtype, device=scores.device)
        scores = scores + bias.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:  # additive (0 or very negative), as some models build them
        scores = scores + attention_mask
    probs = bit_dropout(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)  # 2D padding masks become boolean, as for SDPA


def use_bit_dropout(*modules: nn.Module) -> int:
    """Swap every `nn.Dropout` in `modules` for `BitDropout`, and route SDPA attention of the
    Hugging Face models among them through `ATTENTION`; returns how many dropouts were swapped."""
    swapped = 0
    for root in modules:
        for parent in list(root.modules()):
            for name, child in parent.named_children():
                if type(child) is nn.Dropout:
                    setattr(parent, name, BitDropout(child.p, child.inplace))
                    swapped += 1
            config = getattr(parent, "config", None)
            if getattr(config, "_attn_implementation", None) == "sdpa":
                _register()
                config._attn_implementation = ATTENTION
    return swapped
