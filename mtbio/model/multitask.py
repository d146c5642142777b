"""The shared encoder with a task-keyed dictionary of heads (MT-BERT, seed 004 section 3)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import torch
from torch import nn

from mtbio.errors import MtbioError
from mtbio.model.adapters import NO_ADAPTER, mixed_adapters, use_adapter
from mtbio.model.heads import Head
from mtbio.model.packing import attention_bias
from mtbio.model.poolings import POOLINGS
from mtbio.model.weighting import LossWeighting
from mtbio.model.windows import WINDOW, encode_windows
from mtbio.model.weightings import build_weighting

ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")  # position ids: packed rows only


@dataclass
class TaskOutput:
    logits: torch.Tensor
    loss: torch.Tensor | None = None


class MultiTaskModel(nn.Module):
    """`encoder` is any Hugging Face `AutoModel`; `heads` maps task name → head.

    Heads are keyed by task name and loaded strictly by name, never by position. `adapters`: the tasks with a
    LoRA adapter of their own in the encoder (`mtbio.model.adapters`); a forward pass runs through its task's.
    `weighting`: how a task's loss is weighted (`mtbio.model.weighting`; default `fixed`, its `loss_weight`).
    """

    def __init__(self, encoder: nn.Module, heads: dict[str, Head], adapters: tuple[str, ...] = (),
                 weighting: LossWeighting | None = None):
        super().__init__()
        self.encoder = encoder
        self.weighting = weighting if weighting is not None else build_weighting("fixed", {}, list(heads))
        self.adapters = tuple(adapters)
        self._active_adapter: str | None = None
        self.heads = nn.ModuleDict()
        for name, head in heads.items():
            self.add_head(name, head)
        accepted = inspect.signature(encoder.forward).parameters
        self._encoder_inputs = tuple(k for k in ENCODER_INPUTS if k in accepted)

    @property
    def hidden_size(self) -> int:
        return int(self.encoder.config.hidden_size)

    def forward(self, task: str, labels: torch.Tensor | None = None, **batch: Any) -> TaskOutput:
        if self.adapters and task != self._active_adapter:
            use_adapter(self.encoder, task, self.adapters)
            self._active_adapter = task
        encoded = self._encode(batch)
        head = self.heads[task]
        logits = head(encoded.last_hidden_state, getattr(encoded, "pooler_output", None), batch)
        loss = self.weighting(task, head.loss(logits, labels) * head.config.loss_weight) if labels is not None else None
        return TaskOutput(logits=logits, loss=loss)

    def forward_heads(self, batches: dict[str, dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Each task's logits from ONE encoder pass: `batches` maps task → its batch, every one with the same encoder
        inputs (the first is encoded). Tasks with a LoRA adapter of their own each get a copy of the rows that runs
        through their adapter, in the same pass (PEFT's mixed-adapter batches)."""
        tasks = list(batches)
        variants = list(dict.fromkeys(t if t in self.adapters else NO_ADAPTER for t in tasks))
        first = batches[tasks[0]]
        if variants == [NO_ADAPTER]:
            encoded = self._encode(first)
            hidden, pooled = encoded.last_hidden_state, getattr(encoded, "pooler_output", None)
            return {t: self.heads[t](hidden, pooled, batches[t]) for t in tasks}
        rows = len(first["input_ids"])
        stacked = {k: first[k].repeat(len(variants), *[1] * (first[k].ndim - 1)) for k in self._encoder_inputs if k in first}
        names = [v for v in variants for _ in range(rows)]
        if WINDOW in first:  # rows of segments, encoded as in `forward`: each segment its row's adapter
            stacked[WINDOW] = first[WINDOW].repeat(len(variants))
            encoded = self._encode(stacked, lambda owners: mixed_adapters(self.encoder, [names[r] for r in owners]))
        else:
            with mixed_adapters(self.encoder, names):
                encoded = self._encode(stacked)
        pooled = getattr(encoded, "pooler_output", None)
        logits = {}
        for t in tasks:
            start = variants.index(t if t in self.adapters else NO_ADAPTER) * rows
            part = slice(start, start + rows)
            logits[t] = self.heads[t](encoded.last_hidden_state[part], pooled[part] if pooled is not None else None,
                                      batches[t])
        return logits

    def _encode(self, batch: dict[str, Any], around: Callable[[list[int]], ContextManager[Any]] | None = None) -> Any:
        """The encoder's output for the batch's text columns (`around`: `encode_windows`' context per pass)."""
        inputs = {k: batch[k] for k in self._encoder_inputs if k in batch}
        window = batch.get(WINDOW)
        if window is not None:  # rows of segments, each encoded on its own
            return encode_windows(self.encoder, inputs, int(window[0]), around)
        mask = inputs.get("attention_mask")
        if mask is not None and mask.ndim == 4:  # packed rows (mtbio.data.packing)
            inputs["attention_mask"] = attention_bias(mask, self.encoder, self.encoder.get_input_embeddings().weight.dtype)
        return self.encoder(**inputs)

    def add_head(self, name: str, head: Head) -> None:
        if POOLINGS.get(head.config.pooling).needs_pooler and getattr(self.encoder, "pooler", None) is None:
            raise MtbioError(f"task '{name}' sets pooling: {head.config.pooling}, but this encoder "
                             f"({type(self.encoder).__name__}) has no pooler; use pooling: cls")
        self.heads[name] = head
