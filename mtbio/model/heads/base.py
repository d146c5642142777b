"""What every task head shares: its JSON-able config and the interface.

A head turns the encoder's hidden states into logits, a loss, and decoded predictions (label
strings, tag lists or floats). Each head belongs to a task kind and lives in the kind's module
(`mtbio.kinds`); `build_head` asks the kind for it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from mtbio.errors import MtbioError
from mtbio.model.heads.blocks import build_block
from mtbio.model.poolings import POOLINGS
from mtbio.model.windows import WINDOW, pool_windows
from mtbio.tasks.kinds import task_kind



@dataclass(frozen=True)
class HeadConfig:
    """Everything needed to rebuild a head; saved as `heads/<task>/head_config.json`."""

    task: str
    type: str
    hidden_size: int
    labels: list[str] = field(default_factory=list)
    dropout: float = 0.1
    threshold: float = 0.5
    thresholds: list[float] = field(default_factory=list)  # per label, fitted (--thresholds fit); empty: `threshold`
    # a classification whose metric leaves this class out (micro F1 of the positive classes): under --thresholds fit
    # the class is predicted only when its probability reaches thresholds[0] (empty: argmax)
    negative: str = ""
    loss_weight: float = 1.0
    pooling: str = "cls"
    type_options: dict[str, Any] = field(default_factory=dict)  # the definition's, for kinds whose head reads them
    block: dict[str, Any] = field(default_factory=dict)  # the encoder family's classifier block (mtbio.model.heads.blocks)
    sliding_window: dict[str, Any] = field(default_factory=dict)  # the definition's (stride, aggregate, …); empty: none

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HeadConfig":
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unexpected fields {sorted(unknown)}")
        if data.get("pooling", "cls") not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS.names())}, not {data['pooling']!r}")
        return cls(**data)

    @property
    def num_outputs(self) -> int:
        return max(1, len(self.labels))


INIT_STD = 0.02  # BERT's initializer_range; Hugging Face initialises its task heads the same way


def output_layer(config: HeadConfig) -> nn.Linear:
    """hidden → outputs, initialised as BERT initialises task heads: N(0, 0.02) weights, zero bias."""
    layer = nn.Linear(config.hidden_size, config.num_outputs)
    nn.init.normal_(layer.weight, std=INIT_STD)
    nn.init.zeros_(layer.bias)
    return layer


class Head(nn.Module):
    """Base class. Subclasses set `self.out` and implement forward/loss/decode."""

    # True for heads whose output and loss are per token, so that their training batches can run
    # as packed rows (mtbio.data.packing); heads that pool one position per example are not
    packable: bool = False

    def __init__(self, config: HeadConfig):
        super().__init__()
        self.config = config

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:  # pragma: no cover
        """`hidden`: the encoder's last hidden states; `pooled`: its pooler output, if it has one; `batch`: the
        batch's columns (a kind's own, such as entity positions, among them)."""
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def loss_units(self, label: Any) -> int:
        """How many terms an example with this (featurized) label adds to the mean that `loss`
        takes: one per example here; heads whose loss averages over tokens override it."""
        return 1

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:  # pragma: no cover
        """Logits of a batch → one prediction per example, in label space."""
        raise NotImplementedError

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Logits of a batch → one score record per example: the model's confidence beside `decode`.
        Default: none (regression predicts the score itself)."""
        return [None] * logits.shape[0]

    # True for heads whose decision rule is fitted on training predictions (`fit_decision`, --thresholds fit)
    fits_decision: bool = False

    def fit_decision(self, scores: list[Any], gold: list[Any]) -> None:
        """Fit the decision rule on the training split's `scores` and gold labels (heads with `fits_decision`)."""

    def export_layer(self) -> nn.Linear:
        """The output layer an export carries (a fitted decision rule folded in where it can be)."""
        return self.out  # type: ignore[return-value]


class LinearHead(Head):
    """[the encoder family's classifier block →] dropout → linear on what `forward` reads: the shape of the shipped
    heads."""

    def __init__(self, config: HeadConfig):
        super().__init__(config)
        self.block = build_block(config.block)
        self.dropout = nn.Dropout(config.dropout)
        self.out = output_layer(config)

    def classify(self, features: torch.Tensor) -> torch.Tensor:
        """Logits of what the head reads."""
        return self.out(self.dropout(self.block(features)))


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """One vector per row by a registered pooling that reads no pooler output (cls, mean, ...)."""
    return POOLINGS.get(pooling).fn(hidden, mask, None)


class SentenceHead(LinearHead):
    """What its pooling reads ([CLS], the mean of the tokens, the encoder's pooler output, ...) → dropout → linear:
    the sentence-level heads' shape."""

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        if batch is not None and WINDOW in batch:  # rows of windows: each pooled, then combined
            return self.classify(pool_windows(hidden, batch["attention_mask"], self.config.pooling,
                                              int(batch[WINDOW][0]), self.config.sliding_window["aggregate"]))
        pooling = POOLINGS.get(self.config.pooling)
        if pooling.needs_pooler and pooled is None:
            raise MtbioError(f"task '{self.config.task}' sets pooling: {pooling.name}, but this encoder has no pooler "
                             "output; use pooling: cls or mean")
        mask = batch.get("attention_mask") if batch is not None else None
        if pooling.needs_mask and mask is None:
            raise MtbioError(f"task '{self.config.task}' sets pooling: {pooling.name}, which needs the batch's "
                             "attention mask")
        return self.classify(pooling.fn(hidden, mask, pooled))


def build_head(config: HeadConfig) -> Head:
    """A new head of the config's task kind."""
    return task_kind(config.type).head(config)
