"""`--pair-form`: a classification task over two texts trained as a cross-encoder (the pair encoded together, the
`classification` kind) or as a bi-encoder (each text encoded on its own, their cosine the one feature:
`cosine_classification`).

`auto` decides per task on the training examples only: each form's linear probe on the frozen start encoder (the
`probe` baseline on the pair encoded together; the `cosine-*` baseline's one-feature model) is scored by 5-fold
cross-validation on up to 1,000 of them (folds keep a task's groups together), and the bi form is taken when its
probe scores higher by at least the metric's `min_delta` (1 point for accuracy), else the task's own form is kept.
LP-FT starts the head at that probe, so the run starts from the better of the two.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mtbio.data.example import Example
from mtbio.data.readers import is_pair_task
from mtbio.evaluation.metrics import metric_min_delta, metric_sign, score_task
from mtbio.model.probes import cosines, embed
from mtbio.tasks.kinds import pair_form_kind
from mtbio.tasks.schema import TaskDef

FORMS = ("cross", "bi")
FOLDS = 5
MAX_EXAMPLES = 1000


def pair_form(task: TaskDef) -> str | None:
    """The task's form (cross, bi), or None for a task that is not a classification of two texts."""
    return task.kind.pair_form if is_pair_task(task) else None


def with_pair_form(task: TaskDef, form: str) -> TaskDef:
    """`task` classified in `form` (its labels, data and metric as they are); a task without a pair form unchanged."""
    if pair_form(task) in (None, form):
        return task
    data = {**task.model_dump(), "type": pair_form_kind(form), "type_options": {}, "pooling": "cls"}
    return TaskDef.model_validate(data)


def _cross_validated(task: TaskDef, x: np.ndarray, examples: Sequence[Example]) -> float | None:
    """The task's metric of a linear probe on `x`, each example predicted by the model fitted on the other folds."""
    from sklearn.model_selection import StratifiedGroupKFold

    labels = [str(ex.label) for ex in examples]
    counts = np.unique(labels, return_counts=True)[1]
    folds = min(FOLDS, int(counts.min())) if len(counts) > 1 else 0
    if folds < 2:
        return None
    groups = [ex.group if ex.group is not None else ex.uid for ex in examples]
    predicted: list[Any] = [None] * len(examples)
    for fit, held in StratifiedGroupKFold(folds, shuffle=True, random_state=0).split(x, labels, groups):
        for i, label in zip(held, task.kind.probe.fit_predict(task, x[fit], [examples[j].label for j in fit], x[held])):
            predicted[i] = label
    return float(score_task(task, [ex.label for ex in examples], predicted)[task.metric])


def probe_scores(task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                 max_length: int) -> dict[str, float | None]:
    """{form: cross-validated score of its linear probe on the frozen encoder} on up to MAX_EXAMPLES of `train`."""
    examples = list(train)[:MAX_EXAMPLES]
    cross = embed(encoder, tokenizer, [ex.text or "" for ex in examples], [ex.text_b or "" for ex in examples],
                  max_length=max_length)
    bi = cosines(encoder, tokenizer, examples, max_length)["mean"][:, None]
    return {"cross": _cross_validated(task, cross, examples), "bi": _cross_validated(task, bi, examples)}


def choose_pair_form(task: TaskDef, scores: dict[str, float | None]) -> str:
    """The form whose probe scored higher by at least the metric's min_delta, else the task's own form."""
    own = pair_form(task) or "cross"
    cross, bi = scores.get("cross"), scores.get("bi")
    if cross is None or bi is None:
        return own
    better, margin = metric_sign(task.metric) * (bi - cross), metric_min_delta(task.metric)
    return "bi" if better >= margin else "cross" if better <= -margin else own
