"""Multi-label classification (HoC): [CLS] → dropout → linear, one sigmoid per label, BCE; positive above the
task's `threshold`, or (--thresholds fit) above each label's own threshold, the one with the best F1 on the training
examples (`mtbio.kinds.heads.multilabel.fit_thresholds`), folded into the classifier's bias on export so a 0.5 threshold decides the same.

Labels are multi-hot floats over the label list (NaN for an unlabelled example, so it can never pass for "no
label applies"); the trivial predictor gives every example the label set each label gets by majority vote
over the training examples (usually empty); exported as `AutoModelForSequenceClassification`.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mtbio.data.example import Example
from mtbio.data.featurize import label_index, lookup, text_columns
from mtbio.errors import MtbioError
from mtbio.model.probes import ClassSetProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import CLASSES

if TYPE_CHECKING:
    from mtbio.kinds.heads.multilabel import MultiLabelHead
    from mtbio.model.heads import HeadConfig


@register_kind
class MultiLabel(TaskKind):
    name = "multilabel"
    labels = CLASSES
    probe = ClassSetProbe()
    default_metric = "multilabel_micro_f1"
    export = ExportSpec("AutoModelForSequenceClassification", "text-classification", "multi_label_classification")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import List, Value

        return {"labels": List(Value("float32"))}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, _ = text_columns(chunk, task, tokenizer, max_length)
        index = label_index(task)
        labels = []
        for ex in chunk:
            hot = [float("nan") if ex.label is None else 0.0] * len(index)
            for name in [] if ex.label is None else ex.label if isinstance(ex.label, list) else [ex.label]:
                hot[lookup(index, name, ex, task)] = 1.0
            labels.append(hot)
        columns["labels"] = labels
        return columns

    def head(self, config: HeadConfig) -> MultiLabelHead:
        from mtbio.kinds.heads.multilabel import MultiLabelHead

        return MultiLabelHead(config)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> list[str]:
        if not isinstance(raw, list):
            raise ValueError(f"expected a list of labels, got {raw!r}")
        return list(dict.fromkeys(name(x) for x in raw))  # each label once, in order

    def missing_labels(self, task: TaskDef, labels: Sequence[Any]) -> list[str]:
        used = {name for label in labels for name in label}
        return [name for name in task.label_list if name not in used]

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        labels = [ex.label for ex in train if ex.label is not None]
        if not labels:
            raise MtbioError(f"task '{task.name}': no labelled training examples to fit a trivial predictor on")
        counts = Counter(name for label in labels for name in (label if isinstance(label, list) else [label]))
        majority = [name for name in task.label_list if counts[name] * 2 > len(labels)]
        return [list(majority) for _ in scored]
