"""Extractive question answering (BioASQ-style factoid QA, emrQA): the answer is a span of the second text.

A pair task: `text` is the question, `text_b` the context. A label is the answer's text (the first place the
context holds it) or `{text, start}` (SQuAD's answer_start, a character offset); training reads it as the
context's character span [start, end). The head scores every token as the answer's start and end (a linear
layer hidden → 2, `AutoModelForQuestionAnswering`'s `qa_outputs`), trained with the mean of the two
cross-entropies; a truncated-away answer points at [CLS], as Hugging Face's QA examples do. Decoding takes the
best-scoring span inside the context of at most MAX_ANSWER_TOKENS tokens. Metrics: `span_f1` (per example, the F1
of the predicted and gold characters; averaged) and `span_exact`. The trivial predictor answers with the
context's first word. No linear probe predicts spans, so the no-training baselines are the trivial score only;
no export (`mtbio predict` prints each answer's text).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from mtbio.data.example import Example
from mtbio.data.featurize import IGNORE_INDEX, LABELS_LOST, text_columns
from mtbio.data.readers import is_pair_task
from mtbio.evaluation.metrics import check_scored, register_metric
from mtbio.tasks.kinds import TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import LabelShape

if TYPE_CHECKING:
    from mtbio.kinds.heads.span_extraction import SpanHead
    from mtbio.model.heads import HeadConfig

MAX_ANSWER_TOKENS = 30
OUTSIDE = -1  # the character offset of a token outside the context (the question, special tokens, padding)


class CharSpan(LabelShape):
    """[start, end): a character span of the second text."""

    name, description = "span", "a span of the context"


SPAN = CharSpan()


def answer_span(raw: Any, context: str) -> list[int]:
    """The context's character span of an answer: its text (first occurrence) or {text, start}."""
    if isinstance(raw, dict) and isinstance(raw.get("text"), str) and isinstance(raw.get("start"), int):
        text, start = raw["text"], raw["start"]
        if context[start:start + len(text)] != text:
            raise ValueError(f"answer {text!r} is not at character {start} of the context")
    elif isinstance(raw, str) and raw:
        text, start = raw, context.find(raw)
        if start < 0:
            raise ValueError(f"answer {raw!r} is not in the context")
    else:
        raise ValueError(f"expected an answer: its text, or {{text, start}}; got {raw!r}")
    return [start, start + len(text)]


def token_span(span: list[int] | None, starts: list[int], ends: list[int]) -> list[int]:
    """[first, last] token of a character span (IGNORE_INDEX twice for none; [CLS] = 0 when the window cut it off)."""
    if span is None:
        return [IGNORE_INDEX, IGNORE_INDEX]
    inside = [i for i, (s, e) in enumerate(zip(starts, ends)) if s != OUTSIDE and s < span[1] and e > span[0]]
    if not inside or ends[inside[-1]] < span[1]:
        return [0, 0]
    return [inside[0], inside[-1]]


def _overlap_f1(gold: Sequence[int], pred: Sequence[int]) -> float:
    common = max(0, min(gold[1], pred[1]) - max(gold[0], pred[0]))
    if common == 0:
        return 0.0
    precision, recall = common / (pred[1] - pred[0]), common / (gold[1] - gold[0])
    return 2 * precision * recall / (precision + recall)


@register_metric("span_f1", ("span",))
def span_f1(gold: Sequence[Any], pred: Sequence[Any], task: TaskDef, groups: Any = None) -> float:
    """Mean over examples of the F1 of the characters the predicted and gold spans share."""
    check_scored(gold, pred, task, "span_f1")
    return sum(_overlap_f1(g, p) for g, p in zip(gold, pred)) / len(gold)


@register_metric("span_exact", ("span",))
def span_exact(gold: Sequence[Any], pred: Sequence[Any], task: TaskDef, groups: Any = None) -> float:
    """Fraction of examples whose predicted span is the gold one."""
    check_scored(gold, pred, task, "span_exact")
    return sum(list(g) == list(p) for g, p in zip(gold, pred)) / len(gold)


@register_kind
class SpanExtraction(TaskKind):
    name = "span_extraction"
    labels = SPAN
    pools = False
    min_labels = 0
    default_metric = "span_f1"
    lost_labels = "answers fell past the cut and became 'no answer' targets"
    padded_columns = {"offset_start": OUTSIDE, "offset_end": OUTSIDE}

    def check(self, task: TaskDef) -> list[str]:
        if not is_pair_task(task):
            return ["columns: a span_extraction task reads a question and a context; name the context in "
                    "columns: {text_b: ...}"]
        return []

    def label_list(self, task: TaskDef) -> list[str]:
        return ["start", "end"]  # the head's two outputs per token

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> list[int]:
        return answer_span(raw, example.text_b or "")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import List, Value

        return {"labels": List(Value("int64")), "offset_start": List(Value("int32")),
                "offset_end": List(Value("int32")), LABELS_LOST: Value("int32")}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, encoded = text_columns(chunk, task, tokenizer, max_length, offsets=True)
        columns["offset_start"], columns["offset_end"], columns["labels"] = [], [], []
        columns[LABELS_LOST] = []
        for row, ex in enumerate(chunk):
            context = [part == 1 for part in encoded.sequence_ids(row)]
            offsets = encoded["offset_mapping"][row]
            starts = [s if inside else OUTSIDE for (s, _), inside in zip(offsets, context)]
            ends = [e if inside else OUTSIDE for (_, e), inside in zip(offsets, context)]
            columns["offset_start"].append(starts)
            columns["offset_end"].append(ends)
            columns["labels"].append(token_span(ex.label, starts, ends))  # type: ignore[arg-type]
            columns[LABELS_LOST].append(int(ex.label is not None and columns["labels"][-1] == [0, 0]))
        return columns

    def head(self, config: HeadConfig) -> SpanHead:
        from mtbio.kinds.heads.span_extraction import SpanHead

        return SpanHead(config, OUTSIDE, MAX_ANSWER_TOKENS)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        spans = []
        for ex in scored:
            context = ex.text_b or ""
            start = len(context) - len(context.lstrip())
            word = context[start:].split(maxsplit=1)
            spans.append([start, start + len(word[0]) if word else start])
        return spans

    def postprocess(self, text: Any, prediction: Any, probabilities: Any) -> dict[str, Any]:
        """The answer's text, cut from the input's context."""
        context = text.split("\t", 1)[1] if isinstance(text, str) else text[1]
        return {"answer": context[prediction[0]:prediction[1]]}
