"""Metrics against numbers worked out by hand on tiny examples."""
from __future__ import annotations

import random
from typing import Any

import pytest

from mtbio.errors import MtbioError
from mtbio.evaluation.metrics import METRICS, metric_scale, metric_sign, score_task, selection_score
from mtbio.tasks.schema import TaskDef


def make_task(type: str, labels: list[str] | None = None, metric: str = "accuracy", **kw: Any) -> TaskDef:
    return TaskDef(name="t", type=type, format="tsv", files={"train": "x"}, labels=labels, metric=metric, **kw)


def score(metric: str, gold: list[Any], pred: list[Any], task: TaskDef, groups: list[str] | None = None) -> float:
    return METRICS.get(metric)(gold, pred, task, groups)


REG = make_task("regression", metric="pearson")
REL = make_task("classification", ["CPR:3", "CPR:4", "false"], metric="micro_f1", negative_label="false")
REL_NO_NEG = make_task("classification", ["CPR:3", "CPR:4", "false"], metric="micro_f1")
ML = make_task("multilabel", ["A", "B", "C"], metric="multilabel_micro_f1")
NER_IOB2 = make_task("tagging", ["Chem", "Dis"], metric="entity_f1", tagging_scheme="IOB2")
NER_IO = make_task("tagging", ["Chem", "Dis"], metric="entity_f1", tagging_scheme="IO")
NER_IOBES = make_task("tagging", ["Chem", "Dis"], metric="entity_f1", tagging_scheme="IOBES")
PICO = make_task("tagging", ["PAR", "INT", "OUT"], metric="token_macro_f1", tagging_scheme="IO")
SPAN = make_task("span_extraction", metric="span_f1", columns={"text": 0, "text_b": 1, "label": 2})  # registers its metrics

# ChemProt-like: "false" is the negative class
REL_GOLD = ["CPR:3", "CPR:3", "CPR:4", "false", "false", "false"]
REL_PRED = ["CPR:3", "CPR:4", "CPR:4", "CPR:3", "false", "false"]


# ------------------------------------------------------------------------------------- regression

def test_pearson_spearman_mse_by_hand() -> None:
    # gold 1,2,3,4 (mean 2.5, deviations -1.5 -.5 .5 1.5); pred 1,3,2,4 (deviations -1.5 .5 -.5 1.5)
    # sum of products = 2.25 - .25 - .25 + 2.25 = 4; sum of squares = 5 each → r = 4/5
    assert score("pearson", [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0], REG) == pytest.approx(0.8)
    # mse = (0 + 1 + 1 + 0) / 4
    assert score("mse", [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0], REG) == pytest.approx(0.5)
    # pred 1,3,2,40 has ranks 1,3,2,4 → same rank correlation 0.8, while Pearson moves
    # (sum of products 58, sums of squares 5 and 1085 → r = 58 / sqrt(5425) = 0.78746)
    assert score("spearman", [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 40.0], REG) == pytest.approx(0.8)
    assert score("pearson", [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 40.0], REG) == pytest.approx(0.787459, abs=1e-6)


@pytest.mark.parametrize("metric", ["pearson", "spearman"])
def test_correlation_of_constant_prediction_is_zero_not_nan(metric: str) -> None:
    assert score(metric, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], REG) == 0.0
    assert score(metric, [1.0], [1.0], REG) == 0.0


# --------------------------------------------------------------------------------- classification

def test_micro_f1_excludes_negative_label() -> None:
    # positives CPR:3, CPR:4. tp: rows 0, 2 → 2; fp (positive prediction, wrong): rows 1, 3 → 2;
    # fn (positive gold missed): row 1 → 1. P = 2/4, R = 2/3, F1 = 2*2 / (2*2 + 2 + 1) = 4/7
    assert score("micro_f1", REL_GOLD, REL_PRED, REL) == pytest.approx(4 / 7)
    # counting "false" as a class too gives accuracy: rows 0, 2, 4, 5 correct → 4/6
    assert score("micro_f1", REL_GOLD, REL_PRED, REL_NO_NEG) == pytest.approx(4 / 6)
    assert score("accuracy", REL_GOLD, REL_PRED, REL) == pytest.approx(4 / 6)


def test_macro_f1_over_positive_labels() -> None:
    # CPR:3: tp 1 (row 0), fp 1 (row 3), fn 1 (row 1) → 2/4 = 0.5
    # CPR:4: tp 1 (row 2), fp 1 (row 1), fn 0       → 2/3
    # macro = (1/2 + 2/3) / 2 = 7/12
    assert score("macro_f1", REL_GOLD, REL_PRED, REL) == pytest.approx(7 / 12)


def test_macro_f1_skips_positive_classes_absent_from_gold_and_pred() -> None:
    # only CPR:3 occurs: tp 1, fn 1 (row 1 predicted false) → F1 = 2/3; CPR:4 is left out
    assert score("macro_f1", ["CPR:3", "CPR:3"], ["CPR:3", "false"], REL) == pytest.approx(2 / 3)
    assert score("macro_f1", ["false"], ["false"], REL) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_class_f1s_equal_sklearns(seed: int) -> None:
    """The counted F1s give sklearn's f1_score over the positive labels (macro: those present) on random labels."""
    from sklearn.metrics import f1_score

    rng = random.Random(seed)
    labels = ["a", "b", "c", "d", "none"]
    task = make_task("classification", labels, metric="micro_f1", negative_label="none")
    gold = [rng.choice(labels[: 2 + seed % 3] + ["none"]) for _ in range(40)]
    pred = [g if rng.random() < 0.5 else rng.choice(labels) for g in gold]
    present = [x for x in labels[:4] if x in set(gold) | set(pred)]
    assert score("micro_f1", gold, pred, task) == pytest.approx(
        f1_score(gold, pred, labels=labels[:4], average="micro", zero_division=0), abs=1e-12)
    assert score("macro_f1", gold, pred, task) == pytest.approx(
        f1_score(gold, pred, labels=present, average="macro", zero_division=0), abs=1e-12)


# ------------------------------------------------------------------------------------- multilabel

def test_multilabel_micro_f1_by_hand() -> None:
    # tp: A (ex 0), C (ex 1) → 2; fp: B (ex 1), A (ex 2) → 2; fn: B (ex 0) → 1 → F1 = 4/7
    gold = [["A", "B"], ["C"], []]
    pred = [["A"], ["B", "C"], ["A"]]
    assert score("multilabel_micro_f1", gold, pred, ML) == pytest.approx(4 / 7)
    # subset accuracy: no example has the exact gold set
    assert score("accuracy", gold, pred, ML) == 0.0


def test_hoc_f1_pools_sentences_per_abstract() -> None:
    # abstract d1 = rows 0, 2; d2 = rows 1, 3; d3 = row 4 (d1 and d2 interleaved)
    groups = ["d1", "d2", "d1", "d2", "d3"]
    gold = [["A"], [], ["B"], ["C"], []]
    pred = [["B"], ["C"], ["A"], ["A"], ["B"]]
    # per abstract: d1 gold {A,B} pred {A,B}; d2 gold {C} pred {A,C}; d3 gold {} pred {B}
    # tp = 2 + 1 = 3; fp = A (d2) + B (d3) = 2; fn = 0 → F1 = 6 / (6 + 2) = 0.75
    assert score("hoc_f1", gold, pred, ML, groups) == pytest.approx(0.75)
    # the same rows scored per sentence have no true positive at all
    assert score("multilabel_micro_f1", gold, pred, ML) == 0.0


def test_hoc_f1_needs_groups() -> None:
    with pytest.raises(MtbioError, match="group"):
        score("hoc_f1", [["A"]], [["A"]], ML)
    with pytest.raises(MtbioError, match="group"):
        score("hoc_f1", [["A"]], [["A"]], ML, [None])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------- tagging

def test_entity_f1_partial_span_is_wrong() -> None:
    gold = [["B-Chem", "I-Chem", "O", "B-Dis"], ["B-Dis", "O"]]
    pred = [["B-Chem", "O", "O", "B-Dis"], ["B-Dis", "O"]]
    # gold Chem[0:2], Dis[3], Dis[0]; pred Chem[0:1] (boundary wrong), Dis[3], Dis[0]
    # tp 2, fp 1, fn 1 → F1 = 4 / (4 + 1 + 1) = 2/3
    assert score("entity_f1", gold, pred, NER_IOB2) == pytest.approx(2 / 3)


def test_entity_f1_io_run_is_one_entity() -> None:
    gold = [["I-Chem", "I-Chem", "O", "I-Dis"]]
    pred = [["I-Chem", "I-Chem", "O", "I-Chem"]]
    # gold Chem[0:2], Dis[3]; pred Chem[0:2], Chem[3] → tp 1, fp 1, fn 1 → 0.5
    # (if each I- tag opened its own entity it would be tp 2, fp 1, fn 1 → 2/3)
    assert score("entity_f1", gold, pred, NER_IO) == pytest.approx(0.5)


def test_entity_f1_iobes_is_strict() -> None:
    gold = [["B-Chem", "E-Chem", "O", "S-Dis"]]
    pred = [["B-Chem", "I-Chem", "O", "S-Dis"]]
    # strict IOBES: B-Chem I-Chem without E- is no entity → tp 1 (Dis), fp 0, fn 1 → 2/3
    assert score("entity_f1", gold, pred, NER_IOBES) == pytest.approx(2 / 3)


def test_token_macro_f1_on_io_tags() -> None:
    gold = [["I-PAR", "I-PAR", "O", "I-INT", "I-OUT"], ["I-OUT", "O"]]
    pred = [["I-PAR", "O", "O", "I-INT", "I-INT"], ["I-OUT", "I-PAR"]]
    # word by word: PAR/PAR tp PAR; PAR/O fn PAR; O/O; INT/INT tp INT; OUT/INT fn OUT + fp INT;
    # OUT/OUT tp OUT; O/PAR fp PAR
    # PAR tp1 fp1 fn1 → 1/2; INT tp1 fp1 fn0 → 2/3; OUT tp1 fp0 fn1 → 2/3
    # macro = (1/2 + 2/3 + 2/3) / 3 = 11/18   (micro would be 2*3 / (6 + 2 + 2) = 0.6)
    assert score("token_macro_f1", gold, pred, PICO) == pytest.approx(11 / 18)


def test_tag_sequence_length_mismatch_is_an_error() -> None:
    with pytest.raises(MtbioError, match="example 0 has 2 gold tags but 1 predicted"):
        score("entity_f1", [["O", "O"]], [["O"]], NER_IOB2)


# ------------------------------------------------------------------------------ all metrics, errors

PERFECT: dict[str, tuple[TaskDef, list[Any], list[str] | None]] = {
    "pearson": (REG, [0.5, 1.0, 3.0], None),
    "spearman": (REG, [0.5, 1.0, 3.0], None),
    "mse": (REG, [0.5, 1.0, 3.0], None),
    "accuracy": (REL, REL_GOLD, None),
    "micro_f1": (REL, REL_GOLD, None),
    "macro_f1": (REL, REL_GOLD, None),
    "multilabel_micro_f1": (ML, [["A", "B"], ["C"], []], None),
    "hoc_f1": (ML, [["A"], ["B"], []], ["d1", "d1", "d2"]),
    "entity_f1": (NER_IOB2, [["B-Chem", "I-Chem", "O", "B-Dis"]], None),
    "token_macro_f1": (PICO, [["I-PAR", "O", "I-INT", "I-OUT"]], None),
    "span_f1": (SPAN, [[0, 7], [3, 9]], None),
    "span_exact": (SPAN, [[0, 7], [3, 9]], None),
}


SCORED_ELSEWHERE = {"pair_auc": "tests/test_keep_encoder.py (a cosine's ROC area, hand-computed with ties)"}


def test_every_registered_metric_is_covered() -> None:
    assert sorted({*PERFECT, *SCORED_ELSEWHERE}) == METRICS.names()


@pytest.mark.parametrize("metric", sorted(PERFECT))
def test_perfect_prediction(metric: str) -> None:
    task, gold, groups = PERFECT[metric]
    result = score(metric, gold, list(gold), task, groups)
    assert isinstance(result, float)
    assert result == pytest.approx(0.0 if metric == "mse" else 1.0)


@pytest.mark.parametrize("metric", sorted(PERFECT))
def test_length_mismatch_is_an_error(metric: str) -> None:
    task, gold, groups = PERFECT[metric]
    with pytest.raises(MtbioError, match="gold labels but"):
        score(metric, gold, list(gold)[:-1], task, groups)


def test_metric_on_wrong_task_type_is_an_error() -> None:
    with pytest.raises(MtbioError, match="scores labels that are a number"):
        score("pearson", REL_GOLD, REL_PRED, REL)


def test_unknown_label_is_an_error() -> None:
    with pytest.raises(MtbioError, match="unknown label"):
        score("micro_f1", ["CPR:3"], ["CPR:9"], REL)


def test_score_task_returns_primary_and_extras() -> None:
    task = make_task("classification", ["CPR:3", "CPR:4", "false"], metric="micro_f1",
                     negative_label="false", extra_metrics=["macro_f1", "accuracy"])
    scores = score_task(task, REL_GOLD, REL_PRED)
    assert list(scores) == ["micro_f1", "macro_f1", "accuracy"]
    assert scores == pytest.approx({"micro_f1": 4 / 7, "macro_f1": 7 / 12, "accuracy": 4 / 6})
    assert selection_score(task, scores) == pytest.approx(4 / 7)


def test_metrics_carry_their_direction_and_scale() -> None:
    assert (metric_sign("mse"), metric_scale("mse")) == (-1.0, 1.0)
    assert all(metric_sign(m) == 1.0 and metric_scale(m) == 100.0 for m in METRICS.names() if m != "mse")
    task = make_task("regression", metric="mse")
    assert selection_score(task, {"mse": 0.25}) > selection_score(task, {"mse": 0.5})  # less error is better


def test_trivial_scores_are_the_majority_class_and_all_o() -> None:
    from mtbio.data.example import Example
    from mtbio.evaluation.trivial import trivial_scores
    from mtbio.tasks.schema import TaskDef

    rel = TaskDef(name="r", type="classification", format="tsv", files={"train": "x"}, metric="micro_f1",
                  labels=["neg", "a", "b"], negative_label="neg")
    train = [Example(str(i), label, text="t") for i, label in enumerate(["neg", "neg", "a", "neg", "b"])]
    dev = [Example(str(i), label, text="t") for i, label in enumerate(["a", "neg", "b", "neg"])]
    assert rel.kind.trivial_predictions(rel, train, dev) == ["neg"] * 4
    assert trivial_scores(rel, train, dev)["micro_f1"] == 0.0  # nothing positive is ever predicted
    acc = rel.model_copy(update={"metric": "accuracy", "negative_label": None})
    assert trivial_scores(acc, train, dev)["accuracy"] == 0.5  # 2 of 4 dev examples are "neg"
    ner = TaskDef(name="n", type="tagging", format="conll", files={"train": "x"}, metric="entity_f1",
                  labels=["Chemical"], tagging_scheme="IOB2")
    words = [Example("1", ["B-Chemical", "O"], tokens=["aspirin", "works"])]
    assert trivial_scores(ner, words, words)["entity_f1"] == 0.0
