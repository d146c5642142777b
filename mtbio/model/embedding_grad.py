"""The word embeddings' gradient in one buffer reused from step to step.

The gradient of a vocabulary's embeddings is a dense matrix (30,522 x 384 floats, 47 MB, for MiniLM) that autograd
allocates afresh at every backward pass and the optimizer's `zero_grad(set_to_none=True)` frees. On a CPU a block
that large lies above glibc's mmap threshold (32 MiB at most), so each step maps it anew and faults in every page:
about 11,000 page faults and 19 ms of a 610 ms step of a BC5CDR-chem bf16 fine-tune on one thread (docs/speed.md).
`reuse_embedding_grad(encoder)` keeps the freed gradient and hands it back, zeroed, to the next backward pass, and
autograd accumulates it as it would a new one: the same values (the same `index_add_` as
`torch.nn.functional.embedding`'s backward; tested bit for bit), for one gradient's memory held between steps.
"""
from __future__ import annotations

from types import MethodType
from typing import Any

import torch
from torch import nn

_FALLBACK = ("max_norm", "scale_grad_by_freq", "sparse")  # options whose backward stays torch's own


class _Spare:
    """At most one freed gradient, kept for the next backward pass."""

    def __init__(self) -> None:
        self.tensor: torch.Tensor | None = None

    def keep(self, weight: torch.Tensor) -> None:
        self.tensor = weight.grad

    def take(self, weight: torch.Tensor) -> torch.Tensor:
        """The spare gradient zeroed, or a new one where there is none or it is still `weight`'s gradient
        (accumulating over several backward passes, or `zero_grad(set_to_none=False)`)."""
        spare, self.tensor = self.tensor, None
        if spare is None or spare.shape != weight.shape or spare.dtype != weight.dtype \
                or (weight.grad is not None and weight.grad.data_ptr() == spare.data_ptr()):
            return torch.zeros_like(weight)
        return spare.zero_()


class _Lookup(torch.autograd.Function):
    """`F.embedding(ids, weight, padding_idx)` whose weight gradient is written into the spare buffer."""

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, weight: torch.Tensor, spare: _Spare,
                padding_idx: int | None) -> torch.Tensor:
        ctx.save_for_backward(ids, weight)
        ctx.spare, ctx.padding_idx = spare, padding_idx
        return nn.functional.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        ids, weight = ctx.saved_tensors
        total = ctx.spare.take(weight)
        total.index_add_(0, ids.reshape(-1), grad.reshape(-1, grad.shape[-1]).to(total.dtype))
        if ctx.padding_idx is not None:
            total[ctx.padding_idx] = 0
        return None, total, None, None


def _forward(self: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    if not (torch.is_grad_enabled() and self.weight.requires_grad) or any(getattr(self, o) for o in _FALLBACK):
        return nn.Embedding.forward(self, ids)
    return _Lookup.apply(ids, self.weight, self._mtbio_spare_grad, self.padding_idx)


def reuse_embedding_grad(encoder: nn.Module) -> bool:
    """Have `encoder`'s input embeddings (an `nn.Embedding` being trained) reuse one gradient buffer across steps,
    in place; returns whether they do (not for other input layers, nor frozen embeddings, as under LoRA)."""
    embeddings = encoder.get_input_embeddings() if hasattr(encoder, "get_input_embeddings") else None
    if type(embeddings) is not nn.Embedding or "forward" in vars(embeddings) or not embeddings.weight.requires_grad:
        return False
    spare = _Spare()
    embeddings._mtbio_spare_grad = spare
    embeddings.weight.register_post_accumulate_grad_hook(spare.keep)
    embeddings.forward = MethodType(_forward, embeddings)
    return True
