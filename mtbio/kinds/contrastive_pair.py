"""A pair task's positive pairs trained as sentence embeddings with in-batch negatives: the multiple-negatives
ranking loss that sentence encoders such as the packaged MiniLM were trained with (sentence-transformers'
`MultipleNegativesRankingLoss`), kept in a refinement's mix so the encoder keeps its own objective.

Each text of a pair is encoded on its own and pooled (mean over its tokens by default). In a (micro-)batch, each
positive pair's first text is scored against the second text of every positive pair by their cosine times `scale`
(20, sentence-transformers' default), and cross-entropy pulls it toward its own; pairs with another label are
neither anchors nor candidates. `type_options: {positive: LABEL, scale: 20, pooling: mean|cls}`; `positive` names
the label of a positive pair (required). The head has no weights. A prediction is a pair's cosine; the metric
`pair_auc` is the area under the ROC curve of that cosine against "positive or not" (0.5: no better than chance,
what the trivial predictor, one cosine for every pair, scores). No linear probe; no export (the encoder is what it
trains: export a `bi_encoder` task of the same run, or merge it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from mtbio.data.example import Example
from mtbio.data.featurize import IGNORE_INDEX
from mtbio.errors import MtbioError
from mtbio.evaluation.metrics import check_scored, register_metric
from mtbio.kinds.bi_encoder import SeparatePair
from mtbio.kinds.classification import one_class
from mtbio.tasks.kinds import register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import LabelShape

if TYPE_CHECKING:
    from mtbio.kinds.heads.contrastive_pair import ContrastivePairHead
    from mtbio.model.heads import HeadConfig


class PairClass(LabelShape):
    """One class of a pair, positive (the pair's texts belong together) or not; predicted as the pair's cosine."""

    name, description = "pair", "one class of a pair (positive or not)"


PAIR = PairClass()


class ContrastivePairOptions(BaseModel):
    """`type_options` of a contrastive_pair task."""

    model_config = ConfigDict(extra="forbid")

    positive: str = Field(description="the label of a positive pair: its first text's match is its second")
    scale: float = Field(20.0, gt=0, description="the cosines' multiplier before the softmax (inverse temperature)")
    pooling: Literal["mean", "cls"] = Field("mean", description="a text's embedding: the mean of its tokens, or [CLS]")


def positive_label(task: TaskDef) -> str:
    """The label of the task's positive pairs."""
    return ContrastivePairOptions.model_validate(task.type_options).positive


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start:end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


@register_metric("pair_auc", ("pair",))
def pair_auc(gold: Sequence[Any], pred: Sequence[Any], task: TaskDef, groups: Any = None) -> float:
    """The area under the ROC curve of the predicted cosine against "positive pair or not" (Mann-Whitney U)."""
    check_scored(gold, pred, task, "pair_auc")
    positive = positive_label(task)
    ranks = _ranks([float(p) for p in pred])
    hits = [r for r, g in zip(ranks, gold) if g == positive]
    misses = len(gold) - len(hits)
    if not hits or not misses:
        raise MtbioError(f"task '{task.name}': pair_auc needs positive and other pairs among the scored examples "
                         f"(all {len(gold)} are {'positive' if hits else 'not positive'})")
    return (sum(hits) - len(hits) * (len(hits) + 1) / 2) / (len(hits) * misses)


@register_kind
class ContrastivePair(SeparatePair):
    name = "contrastive_pair"
    labels = PAIR
    min_labels = 2
    label_type = "int64"
    default_metric = "pair_auc"
    options = ContrastivePairOptions

    def check(self, task: TaskDef) -> list[str]:
        problems = super().check(task)
        positive = positive_label(task)
        if positive not in task.label_list:
            problems.append(f"type_options: positive '{positive}' is not one of the labels {task.label_list}")
        return problems

    def pair_labels(self, chunk: Sequence[Example], task: TaskDef) -> list[Any]:
        positive = positive_label(task)
        return [IGNORE_INDEX if ex.label is None else int(ex.label == positive) for ex in chunk]

    def head(self, config: HeadConfig) -> ContrastivePairHead:
        from mtbio.kinds.heads.contrastive_pair import ContrastivePairHead

        options = ContrastivePairOptions.model_validate(config.type_options)
        return ContrastivePairHead(config, options.scale, options.pooling)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> str:
        return one_class(raw, name)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [0.0] * len(scored)
