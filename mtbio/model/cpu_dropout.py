"""Cheaper dropout masks for training on a CPU.

`torch.nn.functional.dropout` on a CPU draws one Bernoulli sample per element, about 8 ns each
on this project's machine: a fifth of a MiniLM training step, more under bf16. `bit_dropout`
takes each mask element from 16 random bits instead (four per 64-bit draw), which is about five
times cheaper; the keep probability is 1 - p rounded to a multiple of 1/65536.

`use_bit_dropout(encoder, heads)` swaps every `nn.Dropout` for `BitDropout`. Attention-probability
dropout happens inside the attention function, so encoders whose attention goes through Hugging
Face's attention interface with SDPA (BERT, RoBERTa, ELECTRA, …) get `ATTENTION`: in training
with dropout it is attention with `bit_dropout`, otherwise plain SDPA. The name lives in the
in-memory config only (transformers does not save it), so saved encoders load anywhere.

Eager attention keeps three float copies of the scores per layer for its backward pass (the
probabilities, the dropout mask, the dropped probabilities): at 512 tokens, batch 32 and 12 heads
that is 1.2 GB a layer in fp32. From `LEAN_FROM_LENGTH` keys on (`MTBIO_LEAN_ATTENTION_FROM`),
`LeanDroppedAttention` keeps only the dropout mask (one byte per score) and recomputes the
probabilities in the backward pass, a block of whole heads at a time, so that no more than one
block's scores exist at once.

On a GPU, where dropout is one fused kernel, nothing is swapped.
"""
from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

ATTENTION = "mtbio_sdpa_bit_dropout"
# keys from which attention takes the lean path: rows longer than the default 128 tokens (NER's packed rows and
# 128-token tasks keep the eager path, faster there); MTBIO_LEAN_ATTENTION_FROM overrides; see docs/speed.md
LEAN_FROM_LENGTH = int(os.environ.get("MTBIO_LEAN_ATTENTION_FROM", "129"))
BLOCK_SCORES = 1 << 20  # scores per block of heads in the lean path (4 MB in fp32, cache-sized; at least one head)


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """Booleans, True with probability 1 - p (to a multiple of 1/65536), from 16 random bits each.

    The bits come from numpy's PCG64, seeded by one draw from torch's generator (so the run's seed decides them
    and a resumed run draws them again): about twice as fast as `torch.randint` for the same bits on a CPU.
    """
    n = shape.numel()
    seed = int(torch.randint(0, 2**62, (1,)))
    words = np.random.Generator(np.random.PCG64(seed)).bit_generator.random_raw((n + 3) // 4)
    # numpy's int16 comparison: about 13 times faster than torch's on a CPU (3.8M elements, one thread)
    keep = words.view(np.int16)[:n] >= round(p * 65536) - 32768
    return torch.from_numpy(keep).view(shape).to(device)


def bit_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Dropout with probability `p` whose mask comes from 16 random bits per element."""
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    keep = keep_mask(x.shape, p, x.device)
    # one mask holding 0 or 1/(1-p): a single product forward and backward (x * 1 * s == x * s exactly); converted
    # from bytes, since torch converts booleans to floats several times slower (_as_bytes)
    return x * _as_bytes(keep).to(x.dtype).mul_(1.0 / (1.0 - p))


class BitDropout(nn.Dropout):
    """`nn.Dropout` (same `p`, same place in the module tree) drawing its mask with `bit_dropout`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bit_dropout(x, self.p, self.training)


class LeanDroppedAttention(torch.autograd.Function):
    """dropout(softmax(q·kᵀ + bias)) · v with a given keep mask, saving q (scaled), k, v, the bias and the mask:
    the backward pass recomputes each block's probabilities. Matmuls run in q's dtype, softmax in fp32,
    as under autocast. Returns (batch, heads, queries, head_dim), contiguous.

    A block is a run of whole heads (`_blocks`), every query row of each, so each head's products are single
    matrix products (no sums over blocks), and a block of 1M scores keeps its elementwise passes in cache: on a
    2-core AVX512 Xeon at 512 tokens, lean over eager went from x1.59 with blocks of query rows across all heads
    to x2.16 (docs/speed.md). A block's scores go to one buffer reused by every block, and the elementwise passes
    run in place (fp32 softmax in place, torch's fused softmax backward): a block allocated afresh can be a new
    mapping whose pages fault in on first touch."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor | None,
                keep: torch.Tensor, p: float, scale: float) -> torch.Tensor:
        # the queries scaled once, contiguous: the scores' left operand and the keys' gradient's right one
        query = torch.mul(query, scale, out=torch.empty(query.shape, dtype=query.dtype, device=query.device))
        key, value = key.contiguous(), value.contiguous()
        ctx.save_for_backward(query, key, value, bias, keep)
        ctx.p, ctx.scale = p, scale
        blocks = _blocks(query, key, bias)
        scores_buffer, mask_buffer = _buffer(query, key, blocks), _buffer(query, key, blocks)
        probs_buffer = _buffer(query, key, blocks, torch.float32) if query.dtype != torch.float32 else None
        queries, keys_t, values, masks = _flat(query), _flat(key).transpose(1, 2), _flat(value), _flat(_as_bytes(keep))
        out = torch.empty((*queries.shape[:2], values.shape[-1]), dtype=value.dtype, device=value.device)
        with torch.autocast(query.device.type, enabled=False):
            for block in blocks:
                probs = _probs(queries, keys_t, block, scores_buffer, probs_buffer)
                dropped = _keep(probs, _to(masks[block.heads], mask_buffer), scores_buffer)
                torch.bmm(dropped, values[block.heads], out=out[block.heads])
        return out.mul_(1.0 / (1.0 - p)).view(*query.shape[:3], value.shape[-1])

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        query, key, value, bias, keep = ctx.saved_tensors
        # the dropout's 1/(1-p) is applied to grad_out (head_dim values per query) instead of to the scores
        grad_out = _flat((grad_out.to(value.dtype) * (1.0 / (1.0 - ctx.p))).contiguous())
        grad_query, grad_key, grad_value = torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)
        blocks = _blocks(query, key, bias)
        scores_buffer, mask_buffer, other_buffer = (_buffer(query, key, blocks) for _ in range(3))
        probs_buffer, grad_buffer = (_buffer(query, key, blocks, torch.float32) if query.dtype != torch.float32
                                     else None for _ in range(2))
        queries, keys, values, masks = _flat(query), _flat(key), _flat(value), _flat(_as_bytes(keep))
        keys_t, values_t = keys.transpose(1, 2), values.transpose(1, 2)
        grad_queries, grad_keys, grad_values = _flat(grad_query), _flat(grad_key), _flat(grad_value)
        with torch.autocast(query.device.type, enabled=False):
            for block in blocks:
                heads = block.heads
                probs = _probs(queries, keys_t, block, scores_buffer, probs_buffer)
                mask = _to(masks[heads], mask_buffer)
                grad_rows = grad_out[heads]
                grad_probs = torch.bmm(grad_rows, values_t[heads], out=_view(other_buffer, tuple(mask.shape)))
                grad_probs = _to(grad_probs.mul_(mask), grad_buffer)
                # probs · (grad - Σ grad · probs), one fused pass per row, written over grad_probs
                grad_scores = torch.ops.aten._softmax_backward_data.out(grad_probs, probs, -1, torch.float32,
                                                                        grad_input=grad_probs)
                grad_scores = _to(grad_scores, other_buffer)  # the products' dtype (grad_probs are spent)
                dropped = _keep(probs, mask, scores_buffer)  # the probabilities are spent: dropped in place
                torch.bmm(dropped.transpose(1, 2), grad_rows, out=grad_values[heads])
                torch.bmm(grad_scores, keys[heads], out=grad_queries[heads]).mul_(ctx.scale)
                torch.bmm(grad_scores.transpose(1, 2), queries[heads], out=grad_keys[heads])
        return grad_query, grad_key, grad_value, None, None, None, None


class Block(NamedTuple):
    """A run of whole heads: a slice of (batch * heads), the (examples, heads) it spans, and its part of the bias
    (broadcastable to (examples, heads, rows, keys)), if any."""
    heads: slice
    shape: tuple[int, int]
    bias: torch.Tensor | None


def _blocks(query: torch.Tensor, key: torch.Tensor, bias: torch.Tensor | None) -> list[Block]:
    """Runs of whole heads with about `BLOCK_SCORES` scores each (at least one head): whole examples where one
    example's heads fit, else heads of one example. `bias`: (batch or 1, heads or 1, rows or 1, keys)."""
    batch, heads, rows = query.shape[:3]
    per_head = rows * key.shape[2]
    if heads * per_head <= BLOCK_SCORES:
        size = BLOCK_SCORES // (heads * per_head)
        spans = [(slice(start, min(start + size, batch)), slice(0, heads)) for start in range(0, batch, size)]
    else:
        size = max(1, BLOCK_SCORES // per_head)
        spans = [(slice(example, example + 1), slice(start, min(start + size, heads)))
                 for example in range(batch) for start in range(0, heads, size)]
    return [Block(slice(examples.start * heads + part.start, (examples.stop - 1) * heads + part.stop),
                  (examples.stop - examples.start, part.stop - part.start),
                  None if bias is None else bias[examples if bias.shape[0] > 1 else slice(None),
                                                 part if bias.shape[1] > 1 else slice(None)])
            for examples, part in spans]


def _buffer(query: torch.Tensor, key: torch.Tensor, blocks: list[Block],
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """Flat storage, in `dtype` (default: query's), for the largest block's scores."""
    count = blocks[0].heads.stop - blocks[0].heads.start
    return torch.empty(count * query.shape[2] * key.shape[2], dtype=dtype or query.dtype, device=query.device)


def _to(x: torch.Tensor, buffer: torch.Tensor | None) -> torch.Tensor:
    """`x` converted to `buffer`'s dtype, written into it (no buffer, or the same dtype: `x` itself). On a CPU torch
    converts each operand of a mixed-dtype elementwise operation into a new full-size tensor, so the lean path keeps
    every elementwise operation in one dtype and converts into reused buffers."""
    if buffer is None or buffer.dtype == x.dtype:
        return x
    return _view(buffer, tuple(x.shape)).copy_(x)


def _view(buffer: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The first elements of a flat buffer, as a contiguous tensor of `shape`."""
    return buffer[:math.prod(shape)].view(shape)


def _flat(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, rows, columns) as (batch * heads, rows, columns), for `torch.bmm`, which takes transposed
    operands as they are (`torch.matmul` on 4-D ones copies a transposed one on every call); a view of a
    contiguous tensor."""
    return x.reshape(-1, *x.shape[2:])


def _as_bytes(mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask as 0/1 bytes, without a copy: multiplying by it zeroes twice as fast as `torch.where` on a
    CPU (a block of 32 x 12 x 42 x 512 float scores: 6.1 vs 12.2 ms), and bytes convert to floats 3-9 times faster
    than booleans (32 x 12 x 100 x 100 to bf16: 0.49 vs 4.3 ms, one thread)."""
    return mask.view(torch.uint8)


def _probs(queries: torch.Tensor, keys_t: torch.Tensor, block: Block, buffer: torch.Tensor,
           probs_buffer: torch.Tensor | None) -> torch.Tensor:
    """One block's probabilities in fp32, as (heads, rows, keys): the scores (`queries` already scaled; both
    operands flattened to (batch * heads, ...), the keys transposed) computed into `buffer`, the softmax in place
    there when the scores are fp32, else in `probs_buffer` (fp32)."""
    block_queries, block_keys_t = queries[block.heads], keys_t[block.heads]
    scores = torch.bmm(block_queries, block_keys_t,
                       out=_view(buffer, (block_queries.shape[0], block_queries.shape[1], block_keys_t.shape[2])))
    if block.bias is not None:
        scores.view(*block.shape, *scores.shape[1:]).add_(block.bias)
    scores = _to(scores, probs_buffer)
    return torch.ops.aten._softmax.out(scores, -1, False, out=scores)


def _keep(probs: torch.Tensor, mask: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """A block's dropped probabilities (not yet scaled by 1/(1-p)) in `buffer`'s dtype (the mask's): in place
    when `probs` has that dtype, else converted into `buffer` (rounding then zeroing gives the same values as
    zeroing then rounding). `probs` are spent either way."""
    return _to(probs, buffer).mul_(mask)


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
    # the scores' dtype: autocast's where it is on, else the inputs'
    dtype = torch.get_autocast_dtype(query.device.type) if torch.is_autocast_enabled(query.device.type) \
        else query.dtype
    bias = attention_mask
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # True: attend
        bias = torch.zeros(attention_mask.shape, dtype=dtype, device=query.device)
        bias.masked_fill_(~attention_mask, torch.finfo(dtype).min)
    if key.shape[2] >= LEAN_FROM_LENGTH:
        query, key, value = query.to(dtype), key.to(dtype), value.to(dtype)
        shape = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
        keep = keep_mask(torch.Size(shape), dropout, query.device)
        out = LeanDroppedAttention.apply(query, key, value, bias, keep, dropout, scale)
        return out.transpose(1, 2).contiguous(), None
    scores = torch.matmul(query * scale, key.transpose(2, 3))
    if bias is not None:  # additive: 0 or very negative
        scores = scores + bias
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
