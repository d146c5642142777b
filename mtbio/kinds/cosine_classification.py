"""Pair classification through the cosine of the two texts encoded on their own (a bi-encoder classifier): each
text pooled (mean over its tokens by default), their cosine one feature, a linear layer from it to the classes,
cross-entropy.

The one-feature model is the no-training `cosine-*` baseline's, so `--lp-ft` starts fine-tuning exactly at the
encoder's zero-shot cosine fitted by a logistic regression on the training pairs (question-pair and entailment
tasks, where that baseline is far above a cross-encoder fine-tuned on a few hundred pairs). Labels, the trivial
predictor and the metrics are classification's. `type_options: {pooling: mean|cls}`. Served by `mtbio predict`;
no `AutoModelFor*` carries the head.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from mtbio.data.example import Example
from mtbio.kinds.bi_encoder import SeparatePair
from mtbio.kinds.classification import Classification, class_labels
from mtbio.tasks.kinds import register_kind
from mtbio.tasks.schema import TaskDef

if TYPE_CHECKING:
    from mtbio.kinds.heads.cosine_classification import CosineClassifierHead
    from mtbio.model.heads import HeadConfig


class CosineClassificationOptions(BaseModel):
    """`type_options` of a cosine_classification task."""

    model_config = ConfigDict(extra="forbid")

    pooling: Literal["mean", "cls"] = Field("mean", description="a text's embedding: the mean of its tokens, or [CLS]")


class CosinePair(SeparatePair):
    """A kind whose head reads the cosine of a pair's two texts encoded on their own (`type_options: {pooling}`);
    the bi pair form of `--pair-form`; no export."""

    pair_form = "bi"  # each text encoded on its own
    options = CosineClassificationOptions
    export = None  # no transformers class carries the head


@register_kind
class CosineClassification(CosinePair, Classification):
    """Classification's labels, metrics and trivial predictor; its own features and head."""

    name = "cosine_classification"
    label_type = "int64"

    def pair_labels(self, chunk: Sequence[Example], task: TaskDef) -> list[Any]:
        return class_labels(chunk, task)

    def head(self, config: HeadConfig) -> CosineClassifierHead:
        from mtbio.kinds.heads.cosine_classification import CosineClassifierHead

        return CosineClassifierHead(config, CosineClassificationOptions.model_validate(config.type_options).pooling)
