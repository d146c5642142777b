"""`--pair-form`: a classification or regression task over two texts trained as a cross-encoder (the pair encoded
together, the `classification` and `regression` kinds) or as a bi-encoder (each text encoded on its own, their cosine
the one feature: `cosine_classification`, `cosine_regression`).

`auto` decides per task on the training examples only: each form's linear probe on the frozen start encoder (the
pair encoded together and mean-pooled, as the `probe` baseline reads it; the
`cosine-mean` baseline's one-feature model) is scored by 5-fold cross-validation on up to 1,000 of them (folds keep
a task's groups together). A form's probe is evidence only where it beats the trivial score (the training majority)
by the metric's `min_delta` (1 point for accuracy); the other form is taken when its probe is evidence and beats this
one's by `min_delta`, else the task keeps its own. A cross-encoder head then reads the pooling its probe read, so
LP-FT starts either form at the probe that chose it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mtbio.data.example import Example
from mtbio.data.readers import is_pair_task
from mtbio.evaluation.metrics import metric_min_delta, metric_sign, score_task
from mtbio.evaluation.trivial import trivial_scores
from mtbio.model.probes import cosines, embed
from mtbio.tasks.kinds import pair_form_kind
from mtbio.tasks.schema import TaskDef

FORMS = ("cross", "bi")
FOLDS = 5
MAX_EXAMPLES = 1000


def pair_form(task: TaskDef) -> str | None:
    """The task's form (cross, bi), or None for a task of two texts whose kind has no other form, or of one text."""
    return task.kind.pair_form if is_pair_task(task) else None


def with_pair_form(task: TaskDef, form: str, pooling: str | None = None) -> TaskDef:
    """`task` classified in `form` (its labels, data and metric as they are), a cross-encoder's head reading
    `pooling` where given; a task without a pair form unchanged."""
    if pair_form(task) is None:
        return task
    if pair_form(task) != form:
        task = TaskDef.model_validate({**task.model_dump(), "type": pair_form_kind(form, task.kind.labels),
                                       "type_options": {},
                                       "pooling": "cls"})
    return task if pooling is None else task.kind.with_pooling(task, pooling)  # a bi-encoder does not pool


def _cross_validated(task: TaskDef, x: np.ndarray, examples: Sequence[Example]) -> float | None:
    """The task's metric of a linear probe on `x`, each example predicted by the model fitted on the other folds."""
    from sklearn.model_selection import StratifiedGroupKFold

    from sklearn.model_selection import GroupKFold

    numbers = all(isinstance(ex.label, (int, float)) for ex in examples)  # a regression: folds need no strata
    labels = [str(ex.label) for ex in examples]
    counts = np.unique(labels, return_counts=True)[1]
    folds = min(FOLDS, len(examples) if numbers else int(counts.min())) if len(counts) > 1 else 0
    if folds < 2:
        return None
    groups = [ex.group if ex.group is not None else ex.uid for ex in examples]
    predicted: list[Any] = [None] * len(examples)
    splitter = GroupKFold(folds) if numbers else StratifiedGroupKFold(folds, shuffle=True, random_state=0)
    for fit, held in splitter.split(x, labels, groups):
        for i, label in zip(held, task.kind.probe.fit_predict(task, x[fit], [examples[j].label for j in fit], x[held])):
            predicted[i] = label
    return float(score_task(task, [ex.label for ex in examples], predicted)[task.metric])


def probe_scores(task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example], max_length: int,
                 pooling: str = "mean") -> dict[str, float | None]:
    """{form: cross-validated score of its linear probe on the frozen encoder (the cross form's features pooled by
    `pooling`), "trivial": the training majority's score} on up to MAX_EXAMPLES of `train`."""
    examples = list(train)[:MAX_EXAMPLES]
    cross = embed(encoder, tokenizer, [ex.text or "" for ex in examples], [ex.text_b or "" for ex in examples],
                  pooling=pooling, max_length=max_length)
    bi = cosines(encoder, tokenizer, examples, max_length)["mean"][:, None]
    return {"cross": _cross_validated(task, cross, examples), "bi": _cross_validated(task, bi, examples),
            "trivial": trivial_scores(task, examples, examples)[task.metric]}


def choose_pair_form(task: TaskDef, scores: dict[str, float | None]) -> str:
    """The other form where its probe beats the trivial score and this form's probe by the metric's min_delta,
    else the task's own form."""
    own = pair_form(task) or "cross"
    other = "bi" if own == "cross" else "cross"
    sign, margin = metric_sign(task.metric), metric_min_delta(task.metric)
    found, mine, trivial = scores.get(other), scores.get(own), scores.get("trivial")
    if found is None or mine is None or (trivial is not None and sign * (found - trivial) < margin):
        return own
    return other if sign * (found - mine) >= margin else own
