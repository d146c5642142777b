"""Per-type counts behind a micro F1: entity types of a tagging task, positive labels of a
classification task. Summing a table's tp / fp / fn gives back the task's micro F1 (`entity_f1`,
`micro_f1`), so a reader sees which types the score comes from."""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from mtbio.data.example import Label
from mtbio.errors import MtbioError
from mtbio.tasks.schema import TaskDef

TypeCounts = dict[str, dict[str, float]]


def positive_classes(task: TaskDef, labels: Sequence[Label]) -> set[tuple[int, str]]:
    """(example, label) of every label but the task's negative one."""
    return {(i, str(label)) for i, label in enumerate(labels) if label != task.negative_label}


def per_type_counts(task: TaskDef, gold: Sequence[Label], pred: Sequence[Label]) -> TypeCounts:
    """Type → {tp, fp, fn, precision, recall, f1}, plus a `micro` row over all types.

    Tagging: entities as `entity_f1` matches them (type and both boundaries; seqeval's conlleval
    mode, strict IOBES for IOBES). Classification: every label but the negative one, as `micro_f1`.
    """
    gold_items, pred_items = task.kind.typed_items(task, gold), task.kind.typed_items(task, pred)
    if gold_items is None or pred_items is None:
        raise MtbioError(f"task '{task.name}': per-type counts are for tasks with one class or a tag per word, "
                         f"not {task.type}")
    tp = Counter(item[1] for item in gold_items & pred_items)  # item[1]: the entity type or label
    fp = Counter(item[1] for item in pred_items - gold_items)
    fn = Counter(item[1] for item in gold_items - pred_items)
    types = sorted(set(tp) | set(fp) | set(fn))
    table = {t: _row(tp[t], fp[t], fn[t]) for t in types}
    table["micro"] = _row(sum(tp.values()), sum(fp.values()), sum(fn.values()))
    return table


def format_type_table(task: str, table: TypeCounts) -> str:
    """Plain-text per-type table, the micro row last."""
    lines = [f"{task}: per type", f"  {'type':24s} {'tp':>6s} {'fp':>6s} {'fn':>6s} {'prec':>7s} {'recall':>7s} {'f1':>7s}"]
    for name, row in table.items():
        lines.append(f"  {name:24s} {row['tp']:6.0f} {row['fp']:6.0f} {row['fn']:6.0f} {row['precision']:7.4f} "
                     f"{row['recall']:7.4f} {row['f1']:7.4f}")
    return "\n".join(lines)


def entities(task: TaskDef, sequences: Sequence[Label]) -> set[tuple[int, str, int, int]]:
    """(sentence, type, start, end) of every entity."""
    from seqeval.metrics.sequence_labeling import get_entities  # imports sklearn and scipy.stats: ~1 s
    from seqeval.scheme import IOBES, Entities

    if task.tagging_scheme == "IOBES":
        found = Entities([list(s) for s in sequences], IOBES).entities  # type: ignore[arg-type]
        return {(e.sent_id, e.tag, e.start, e.end) for sentence in found for e in sentence}
    return {(i, kind, start, end) for i, s in enumerate(sequences) for kind, start, end in get_entities(list(s))}  # type: ignore[arg-type]


def _row(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}
