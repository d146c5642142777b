"""Single-label classification (relation classes, NLI, yes/no/maybe QA): [CLS] → dropout → linear, cross-entropy.

Labels are class indices; the trivial predictor is the most frequent training label; exported as
`AutoModelForSequenceClassification`.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mtbio.data.example import Example
from mtbio.data.featurize import IGNORE_INDEX, label_index, lookup, text_columns
from mtbio.errors import MtbioError
from mtbio.evaluation.breakdown import positive_classes
from mtbio.model.probes import ClassProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import CLASS

if TYPE_CHECKING:
    from mtbio.kinds.heads.classification import ClassificationHead
    from mtbio.model.heads import HeadConfig


def class_labels(chunk: Sequence[Example], task: TaskDef) -> list[int]:
    """Each example's class index (-100 for an unlabelled one)."""
    index = label_index(task)
    return [IGNORE_INDEX if ex.label is None else lookup(index, ex.label, ex, task) for ex in chunk]


def one_class(raw: Any, name: Callable[..., str]) -> str:
    """A single-label example's class (a string among the task's labels)."""
    if not isinstance(raw, str):
        raise ValueError(f"expected one class label, got {raw!r}")
    return name(raw)


def majority_class(task: TaskDef, train: Sequence[Example]) -> str:
    """The most frequent training label (ties: the one listed first)."""
    counts = Counter(str(ex.label) for ex in train if ex.label is not None)
    if not counts:
        raise MtbioError(f"task '{task.name}': no labelled training examples to fit a trivial predictor on")
    return max(task.label_list, key=lambda name: (counts[name], -task.label_list.index(name)))


class SingleLabel(TaskKind):
    """What every single-label kind shares: one class per example, its check, typed items and trivial predictor."""

    labels = CLASS
    probe = ClassProbe()
    min_labels = 2

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> str:
        return one_class(raw, name)

    def typed_items(self, task: TaskDef, labels: Sequence[Any]) -> set[tuple]:
        return positive_classes(task, labels)

    def missing_labels(self, task: TaskDef, labels: Sequence[Any]) -> list[str]:
        used = set(labels)
        return [name for name in task.label_list if name not in used]

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [majority_class(task, train)] * len(scored)


@register_kind
class Classification(SingleLabel):
    name = "classification"
    pair_form = "cross"  # a pair is encoded together
    default_metric = "accuracy"
    export = ExportSpec("AutoModelForSequenceClassification", "text-classification", "single_label_classification")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import Value

        return {"labels": Value("int64")}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, _ = text_columns(chunk, task, tokenizer, max_length)
        columns["labels"] = class_labels(chunk, task)
        return columns

    def head(self, config: HeadConfig) -> ClassificationHead:
        from mtbio.kinds.heads.classification import ClassificationHead

        return ClassificationHead(config)
