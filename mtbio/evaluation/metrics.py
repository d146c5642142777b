"""Task metrics: pure functions of decoded gold and predicted labels, registered by name.

Every metric has the signature `fn(gold, pred, task, groups=None) -> float` and sees labels as
`mtbio.data.example` defines them (by the task kind's label form: one class, a str; a set of classes,
a list of positive labels; tags, a list of tags per word; a number, a float), never ids or tensors.
A metric is registered with the label forms it scores, its direction, display scale and effect threshold
(`register_metric`): model selection, early stopping, verdicts, tables and plots read them from here
(`metric_sign`, `metric_scale`, `metric_min_delta`, `selection_score`). mse's threshold, 0.05 squared label units,
is a twentieth of the variance of a 0–4 similarity score with sd 1.
`score_task` computes a task's primary metric and its extra metrics.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from mtbio.data.example import Label
from mtbio.errors import MtbioError
from mtbio.registry import Registry
from mtbio.tasks.loading import register_name_check
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import describe_shape

Groups = Sequence[str | None]
MetricFn = Callable[[Sequence[Label], Sequence[Label], TaskDef, Groups | None], float]



@dataclass(frozen=True)
class Metric:
    """A registered metric: the function, whether higher is better, the factor tables show it by, and the smallest
    difference the decision rule counts as an effect (in the metric's own units)."""

    name: str
    fn: MetricFn
    forms: tuple[str, ...]  # the label forms it scores (mtbio.tasks.kinds.LabelForm)
    higher_is_better: bool = True
    scale: float = 100.0
    min_delta: float = 0.01

    def __call__(self, gold: Sequence[Label], pred: Sequence[Label], task: TaskDef,
                 groups: Groups | None = None) -> float:
        return self.fn(gold, pred, task, groups)


METRICS: Registry[Metric] = Registry("metric")


def register_metric(name: str, forms: tuple[str, ...], higher_is_better: bool = True,
                    scale: float = 100.0, min_delta: float = 0.01) -> Callable[[MetricFn], MetricFn]:
    """Register a metric function under `name` (a task definition's `metric`) with the label forms it scores,
    its direction, display scale and effect threshold (default: one point of a 0–1 score)."""
    def decorator(fn: MetricFn) -> MetricFn:
        METRICS.register(name)(Metric(name, fn, tuple(forms), higher_is_better, scale, min_delta))
        return fn

    return decorator


def metric_sign(name: str) -> float:
    """+1 when higher is better, −1 when lower is (so sign × score is always higher-is-better)."""
    return 1.0 if METRICS.get(name).higher_is_better else -1.0


def metric_scale(name: str) -> float:
    """The factor tables show the metric by (×100 for scores in [0, 1], ×1 for errors such as mse)."""
    return METRICS.get(name).scale


def metric_min_delta(name: str) -> float:
    """The smallest difference the decision rule counts as an effect, in the metric's own units."""
    return METRICS.get(name).min_delta


def score_task(task: TaskDef, gold: Sequence[Label], pred: Sequence[Label],
               groups: Groups | None = None) -> dict[str, float]:
    """{metric name: score} for the task's primary metric (`task.metric`) and every extra metric."""
    names = [task.metric] + [m for m in task.extra_metrics if m != task.metric]
    return {name: METRICS.get(name)(gold, pred, task, groups) for name in names}


def selection_score(task: TaskDef, scores: Mapping[str, float]) -> float:
    """The primary metric of a `score_task` result, signed so that higher is better (model selection)."""
    return metric_sign(task.metric) * scores[task.metric]


# ----------------------------------------------------------------------------------------------
# Input checks


def check_scored(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, metric: str) -> None:
    """What every metric checks first: it scores the task's labels, as many predictions as gold labels, not none."""
    problem = _inapplicable(metric, task)
    if problem:
        raise MtbioError(f"{problem}; task '{task.name}'")
    if len(gold) != len(pred):
        raise MtbioError(f"task '{task.name}': {len(gold)} gold labels but {len(pred)} predictions")
    if len(gold) == 0:
        raise MtbioError(f"task '{task.name}': nothing to score (no examples)")


def _inapplicable(metric: str, task: TaskDef) -> str | None:
    """Why `metric` cannot score `task` (its kind's label shape is not among those the metric scores), else None."""
    forms = METRICS.get(metric).forms
    shape = task.kind.labels
    if shape.name in forms:
        return None
    return (f"metric '{metric}' scores labels that are {' or '.join(map(describe_shape, forms))}; a {task.type} "
            f"task's labels are {shape.description}")


def _check_known(labels: Sequence[str], task: TaskDef, what: str) -> None:
    unknown = sorted(set(labels) - set(task.label_list))
    if unknown:
        raise MtbioError(f"task '{task.name}': {what} contain unknown label(s) {unknown}")


def _f1(tp: int, fp: int, fn: int) -> float:
    """F1 from counts; 0.0 when it is undefined (no predicted and no gold positives)."""
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def _counts_per_label(pairs: Iterable[tuple[str | None, str | None]]) -> dict[str, list[int]]:
    """[tp, fp, fn] per label over (gold, predicted) pairs; None is no label (a negative class, an "O" tag) and is
    not counted. Labels found in neither side have no entry."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for g, p in pairs:
        if g is not None and g == p:
            counts[g][0] += 1
            continue
        if p is not None:
            counts[p][1] += 1
        if g is not None:
            counts[g][2] += 1
    return counts


def _macro_f1(counts: dict[str, list[int]]) -> float:
    """Mean F1 over the labels of `_counts_per_label`; 0.0 if there are none."""
    return float(np.mean([_f1(*c) for c in counts.values()])) if counts else 0.0


# ----------------------------------------------------------------------------------------------
# Regression


def _regression_arrays(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef,
                       metric: str) -> tuple[np.ndarray, np.ndarray]:
    check_scored(gold, pred, task, metric)
    return np.asarray(gold, dtype=float), np.asarray(pred, dtype=float)


def _is_constant(x: np.ndarray) -> bool:
    return len(x) < 2 or bool(np.all(x == x[0]))


@register_metric("pearson", ("number",))
def pearson(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Pearson r. Returns 0.0 (not nan) when gold or pred is constant or has fewer than two values."""
    from scipy.stats import pearsonr  # here, not at the top: a training process that needs none saves ~1.4 s

    g, p = _regression_arrays(gold, pred, task, "pearson")
    return 0.0 if _is_constant(g) or _is_constant(p) else float(pearsonr(g, p)[0])


@register_metric("spearman", ("number",))
def spearman(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Spearman rho. Returns 0.0 (not nan) when gold or pred is constant or has fewer than two values."""
    from scipy.stats import spearmanr

    g, p = _regression_arrays(gold, pred, task, "spearman")
    return 0.0 if _is_constant(g) or _is_constant(p) else float(spearmanr(g, p)[0])


@register_metric("mse", ("number",), higher_is_better=False, scale=1.0, min_delta=0.05)
def mse(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Mean squared error (lower is better)."""
    g, p = _regression_arrays(gold, pred, task, "mse")
    return float(np.mean((g - p) ** 2))


# ----------------------------------------------------------------------------------------------
# Single-label classification


@register_metric("accuracy", ("class", "classes", "tags"))
def accuracy(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Fraction of examples whose prediction equals the gold label.

    Multilabel examples count as correct when the label sets are equal (subset accuracy);
    tagging examples when the whole tag sequence is equal.
    """
    check_scored(gold, pred, task, "accuracy")
    key = task.kind.labels.key
    return float(np.mean([key(g) == key(p) for g, p in zip(gold, pred)]))


def _classification_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, metric: str,
                       average: str) -> float:
    check_scored(gold, pred, task, metric)
    _check_known(gold, task, "gold labels")
    _check_known(pred, task, "predictions")
    # counted here rather than by sklearn's f1_score (the same numbers: tests/test_metrics.py), whose import
    # costs a second in every process that scores a run
    positive = (lambda x: None if x == task.negative_label else x)
    counts = _counts_per_label((positive(g), positive(p)) for g, p in zip(gold, pred))
    if average == "macro":
        return _macro_f1(counts)
    return _f1(*(sum(c[i] for c in counts.values()) for i in range(3)))


@register_metric("micro_f1", ("class",))
def micro_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Micro F1 over the positive classes: every label except `task.negative_label`.

    tp = correct predictions of a positive class, fp = positive-class predictions that are
    wrong, fn = positive-class gold labels that were missed; as BLUE `eval_rel.py` and BLURB
    score ChemProt, DDI, GAD and i2b2-2010. Without a negative label this equals accuracy.
    """
    return _classification_f1(gold, pred, task, "micro_f1", "micro")


@register_metric("macro_f1", ("class",))
def macro_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Mean of per-class F1 over the positive classes that occur in gold or pred (sklearn's rule).

    A class absent from both cannot be scored and is left out; 0.0 if no positive class occurs.
    """
    return _classification_f1(gold, pred, task, "macro_f1", "macro")


# ----------------------------------------------------------------------------------------------
# Multilabel


def _label_sets(labels: Sequence[Label], task: TaskDef, what: str) -> list[set[str]]:
    sets = [set(x) for x in labels]  # type: ignore[arg-type]
    _check_known([x for s in sets for x in s], task, what)
    return [s - {task.negative_label} for s in sets]


def _set_micro_f1(gold: list[set[str]], pred: list[set[str]]) -> float:
    tp = sum(len(g & p) for g, p in zip(gold, pred))
    fp = sum(len(p - g) for g, p in zip(gold, pred))
    fn = sum(len(g - p) for g, p in zip(gold, pred))
    return _f1(tp, fp, fn)


@register_metric("multilabel_micro_f1", ("classes",))
def multilabel_micro_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef,
                        groups: Groups | None = None) -> float:
    """Micro F1 over all (example, label) decisions; `task.negative_label`, if listed, is ignored."""
    check_scored(gold, pred, task, "multilabel_micro_f1")
    return _set_micro_f1(_label_sets(gold, task, "gold labels"), _label_sets(pred, task, "predictions"))


@register_metric("hoc_f1", ("classes",))
def hoc_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """BLURB HoC score: micro F1 over (abstract, hallmark) decisions after pooling sentences.

    Each row is a sentence; `groups` holds its abstract id (PMID). An abstract's gold and
    predicted label sets are the unions over its sentences. Then tp, fp and fn are counted over
    every (abstract, label) pair and F1 = 2tp / (2tp + fp + fn).

    Source followed: `eval_hoc` / `compute_p_r_f` in michiyasunaga/LinkBERT
    `src/seqcls/utils_hoc.py` (the public BLURB fine-tuning code for HoC; the BLURB paper only
    says "average micro F1 across the ten cancer hallmarks"). It pools all cells, so despite its
    `.mean()` calls it is a single micro F1. BLUE's `blue/eval_hoc.py` differs: it averages
    per-abstract precision and recall before taking F1, and needs every abstract to have a
    gold label.
    """
    check_scored(gold, pred, task, "hoc_f1")
    if groups is None or len(groups) != len(gold) or any(g is None for g in groups):
        raise MtbioError(f"task '{task.name}': hoc_f1 needs the abstract id (group) of every sentence")
    gold_docs: dict[str, set[str]] = defaultdict(set)
    pred_docs: dict[str, set[str]] = defaultdict(set)
    for doc, g, p in zip(groups, _label_sets(gold, task, "gold labels"), _label_sets(pred, task, "predictions")):
        gold_docs[doc].update(g)  # type: ignore[index]
        pred_docs[doc].update(p)  # type: ignore[index]
    docs = list(gold_docs)
    return _set_micro_f1([gold_docs[d] for d in docs], [pred_docs[d] for d in docs])


# ----------------------------------------------------------------------------------------------
# Tagging


def _tag_sequences(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef,
                   metric: str) -> tuple[list[list[str]], list[list[str]]]:
    check_scored(gold, pred, task, metric)
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):  # type: ignore[arg-type]
            raise MtbioError(f"task '{task.name}': example {i} has {len(g)} gold tags but {len(p)} predicted")  # type: ignore[arg-type]
    return [list(g) for g in gold], [list(p) for p in pred]  # type: ignore[arg-type]


@register_metric("entity_f1", ("tags",))
def entity_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef, groups: Groups | None = None) -> float:
    """Entity-level micro F1 (seqeval): an entity counts only if its type and both boundaries match.

    IOB2 and IO use seqeval's conlleval-compatible mode, where an I- tag after O or after
    another type opens an entity, so IO runs of one type are one entity. IOBES uses seqeval's
    strict mode with the IOBES scheme.
    """
    g, p = _tag_sequences(gold, pred, task, "entity_f1")
    from seqeval.metrics import f1_score as seqeval_f1  # imports sklearn and scipy.stats: ~1.4 s
    from seqeval.scheme import IOBES

    if task.tagging_scheme == "IOBES":
        return float(seqeval_f1(g, p, mode="strict", scheme=IOBES, zero_division=0))
    return float(seqeval_f1(g, p, zero_division=0))


def _tag_type(tag: str) -> str | None:
    if tag == "O":
        return None
    return tag[2:] if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES" else tag


@register_metric("token_macro_f1", ("tags",))
def token_macro_f1(gold: Sequence[Label], pred: Sequence[Label], task: TaskDef,
                   groups: Groups | None = None) -> float:
    """BLURB EBM PICO score: word-level F1 per element type, macro-averaged over the types.

    A word belongs to type T when its tag is T with any prefix (B-/I-/E-/S-). Types occurring
    in neither gold nor pred are left out; 0.0 if no type occurs.
    """
    g, p = _tag_sequences(gold, pred, task, "token_macro_f1")
    return _macro_f1(_counts_per_label(pair for gs, ps in zip(g, p)
                                       for pair in zip(map(_tag_type, gs), map(_tag_type, ps))))


@register_name_check
def _metric_problems(task: TaskDef) -> list[tuple[str, str]]:
    """A task definition's metric names that no metric is registered under, or that cannot score its labels."""
    problems = []
    for key, metric in [("metric", task.metric)] + [("extra_metrics", m) for m in task.extra_metrics]:
        problem = _inapplicable(metric, task) if metric in METRICS else \
            f"unknown metric '{metric}' (known: {', '.join(METRICS.names())})"
        if problem:
            problems.append((key, problem))
    return problems
