"""Token tagging (NER, PICO): every token → dropout → linear, cross-entropy on first sub-words only.

Examples hold words and one tag per word (`tagging_scheme` IOB2, IO or IOBES; `labels` may list entity
types, expanded to tags). Labels of non-first sub-words and special tokens are -100 (ignored); there
are no X/CLS/SEP classes. Decoding maps first-sub-word predictions back to one tag per word. The
trivial predictor tags every word `O`; exported as `AutoModelForTokenClassification`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from mtbio.data.example import Example
from mtbio.data.featurize import LABELS_LOST, word_columns, word_features
from mtbio.evaluation.breakdown import entities
from mtbio.model.probes import TagProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef, expand_entity_types, has_tag_prefix
from mtbio.tasks.shapes import TAGS, WORDS, split_words

if TYPE_CHECKING:
    from mtbio.kinds.heads.tagging import TaggingHead
    from mtbio.model.heads import HeadConfig


def entity_spans(text: str, tags: Sequence[str], probs: Sequence[float]) -> list[dict[str, Any]]:
    """The entities of one tagged text (its words' tags and their probabilities), with character offsets."""
    words = split_words(text)
    return [{"text": text[words[first][1]:words[last][2]], "type": kind, "start": words[first][1],
             "end": words[last][2], "score": sum(probs[first:last + 1]) / (last - first + 1)}
            for kind, first, last in tag_spans(tags)]


def tag_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word) of each entity in a tag sequence (IOB2, IO or IOBES)."""
    spans: list[tuple[str, int, int]] = []
    kind, first = None, 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, name = tag.partition("-") if tag != "O" else ("O", "", None)
        continues = kind is not None and name == kind and prefix in ("I", "E")
        if not continues and kind is not None:
            spans.append((kind, first, i - 1))
            kind = None
        if prefix in ("B", "S") or (prefix in ("I", "E") and kind is None):
            kind, first = name, i
        if prefix in ("E", "S") and kind is not None:
            spans.append((kind, first, i))
            kind = None
    return spans


@register_kind
class Tagging(TaskKind):
    name = "tagging"
    padded_columns = {"labels": -100}  # a tag per token; -100: nothing learned there
    inputs = WORDS
    labels = TAGS
    probe = TagProbe()
    pools = False
    default_metric = "entity_f1"
    lost_labels = "entities lost words to the cut (not learned whole; decoding tags those words O)"
    export = ExportSpec("AutoModelForTokenClassification", "token-classification")

    def check(self, task: TaskDef) -> list[str]:
        return [] if task.tagging_scheme else ["tagging_scheme: a tagging task needs tagging_scheme (IOB2, IO or IOBES)"]

    def label_list(self, task: TaskDef) -> list[str]:
        labels = list(task.labels or [])
        if "O" not in labels and not any(has_tag_prefix(x) for x in labels):
            return expand_entity_types(labels, task.tagging_scheme or "IOB2")
        return labels

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import Value

        return {**word_features(), LABELS_LOST: Value("int32")}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        """`word_columns`, and per example the entities that lost a word to the cut (`LABELS_LOST`)."""
        columns = word_columns(chunk, task, tokenizer, max_length)
        columns[LABELS_LOST] = []
        for ex, index in zip(chunk, columns["word_index"]):
            kept = {word for word in index if word >= 0}
            spans = tag_spans(ex.label) if isinstance(ex.label, list) else []
            columns[LABELS_LOST].append(sum(1 for _, first, last in spans
                                            if any(w not in kept for w in range(first, last + 1))))
        return columns

    def head(self, config: HeadConfig) -> TaggingHead:
        from mtbio.kinds.heads.tagging import TaggingHead

        return TaggingHead(config)

    def typed_items(self, task: TaskDef, labels: Sequence[Any]) -> set[tuple]:
        return entities(task, labels)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> list[str]:
        if not isinstance(raw, list):
            raise ValueError(f"expected a list of labels, got {raw!r}")
        tags = [name(x, what="tag") for x in raw]
        if example.tokens is None or len(tags) != len(example.tokens):
            raise ValueError("a tagging example needs one tag per token")
        return tags

    def label_notes(self, task: TaskDef, label: Any) -> list[str]:
        """Each I- (or IOBES E-) tag that does not continue an entity of its type: decoding and the metric read it as
        the start of one, which a file with a broken B- does not mean."""
        if task.tagging_scheme not in ("IOB2", "IOBES"):
            return []
        notes = []
        for previous, tag in zip(["O", *label], label):
            if tag[:2] in ("I-", "E-") and (previous[:2] not in ("B-", "I-") or previous[2:] != tag[2:]):
                notes.append(f"{tag} after {previous}, read as the start of an entity")
        return notes

    def missing_labels(self, task: TaskDef, labels: Sequence[Any]) -> list[str]:
        """The tags of each entity type that no tag of `labels` has."""
        used = {_entity_type(tag) for tag in set().union(*labels) if tag != "O"}
        return [tag for tag in task.label_list if tag != "O" and _entity_type(tag) not in used]

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [["O"] * len(ex.tokens or []) for ex in scored]

    def postprocess(self, text: Any, prediction: Any, probabilities: Any) -> dict[str, Any]:
        """The words of raw `text` and its entities (`entity_spans`, from the same forward pass)."""
        return {"words": [w for w, _, _ in split_words(text)], "entities": entity_spans(text, prediction, probabilities)}


def _entity_type(tag: str) -> str:
    """The entity type of a tag (`B-Chemical` → Chemical; a tag without a prefix is its own type)."""
    return tag.split("-", 1)[1] if has_tag_prefix(tag) else tag
