"""One matrix product for the query, key and value projections of BERT-style self-attention.

Hugging Face's BERT family (BERT, RoBERTa, ELECTRA, ...) projects each layer's hidden states three times, through
`query`, `key` and `value`. `fuse_qkv(encoder)` makes those layers run the three as one product with the
weights concatenated: one wider matmul, one input gradient instead of three added together, and under bf16
autocast one cast of the hidden states instead of three. A MiniLM-L6 training forward and backward (batch 32, one
thread, AVX512-BF16 EPYC; benchmarks/bench_fused_qkv.py): x1.02-1.04 in fp32, x1.00-1.01 in bf16, so mtbio
fuses on a CPU, where it was measured. The parameters stay where they were, so the state dict, saved files,
optimizer groups and adapters see the same `query`, `key` and `value`.

A layer falls back to its own forward whenever the fused one would not compute the same thing: a key/value
cache or cross-attention, projections that are not plain `nn.Linear` (a LoRA-wrapped `query`, say), or the
eager attention path, whose function is model-specific.
"""
from __future__ import annotations

from types import MethodType
from typing import Any

import torch
from torch import nn

PROJECTIONS = ("query", "key", "value")


def _plain_projections(module: nn.Module) -> bool:
    """`query`, `key` and `value` are plain `nn.Linear` layers with biases (not wrapped, by LoRA say)."""
    return all(type(getattr(module, name, None)) is nn.Linear and getattr(module, name).bias is not None
               for name in PROJECTIONS)


def _fusable(module: nn.Module) -> bool:
    return _plain_projections(module) \
        and hasattr(module, "attention_head_size") and hasattr(module, "scaling") \
        and not getattr(module, "is_decoder", False) and "forward" not in vars(module)


def _fused_forward(self: nn.Module, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                   **kwargs: Any) -> tuple[torch.Tensor, Any]:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    implementation = self.config._attn_implementation
    if kwargs.get("cache") is not None or kwargs.get("past_key_values") is not None \
            or kwargs.get("encoder_hidden_states") is not None or implementation not in ALL_ATTENTION_FUNCTIONS \
            or not _plain_projections(self):
        return type(self).forward(self, hidden_states, attention_mask, **kwargs)
    kwargs.pop("cache", None)
    kwargs.pop("past_key_values", None)
    weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
    bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
    input_shape = hidden_states.shape[:-1]
    projected = nn.functional.linear(hidden_states, weight, bias)
    # (batch, tokens, 3, heads, head size) -> three (batch, heads, tokens, head size) views
    query, key, value = projected.view(*input_shape, 3, -1, self.attention_head_size).permute(2, 0, 3, 1, 4).unbind(0)
    output, weights = ALL_ATTENTION_FUNCTIONS[implementation](
        self, query, key, value, attention_mask, dropout=self.dropout.p if self.training else 0.0,
        scaling=self.scaling, **kwargs)
    return output.reshape(*input_shape, -1).contiguous(), weights


def fuse_qkv(encoder: nn.Module) -> int:
    """Run the query/key/value projections of `encoder`'s BERT-style self-attention layers as one product
    (in place, parameters untouched); returns how many layers were fused."""
    fused = 0
    for module in encoder.modules():
        if _fusable(module):
            module.forward = MethodType(_fused_forward, module)
            fused += 1
    return fused
