"""The shapes a task kind declares: what its examples hold (`InputShape`) and what its labels are (`LabelShape`).

A kind names one of each (`TaskKind.inputs`, `TaskKind.labels`); readers, metrics, probes and `mtbio predict` ask
the shape, never test which one it is. A kind with a new label shape defines its own `LabelShape` subclass in
its module (metrics then name it in the shapes they score).

An input shape declares its fields (`InputShape.input_fields`, each an `InputField`): the names under which an
`Example` holds its inputs and the `columns` keys a generic reader maps onto them. A field holds a text, a list
of texts (`texts`: the segments of an example, such as a question's candidate answers; `SEGMENTS`) or words.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence

WORD = re.compile(r"\w+|[^\w\s]")


def split_words(text: str) -> list[tuple[str, int, int]]:
    """Words and punctuation marks of raw text with their character offsets, as the BioCreative
    corpora are tokenized ("Na+/K+-ATPase," → Na + / K + - ATPase ,)."""
    return [(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]


LABEL_SHAPES: dict[str, "LabelShape"] = {}  # name → shape, every shape made so far (a kind's own ones included)


class LabelShape:
    """One form of label, e.g. one class. `name` is what a metric lists among the shapes it scores."""

    name: str = ""
    description: str = ""  # "one class": how messages name it
    per_word: bool = False  # one label per word of the example (tags)

    def __init__(self) -> None:
        LABEL_SHAPES[self.name] = self

    def from_cell(self, raw: str, separator: str) -> Any:
        """The label a delimited file's label cell holds (`separator` joins a set's members)."""
        return raw

    def from_strings(self, values: Sequence[str]) -> Any:
        """The label a list of label strings (a BigBio record's `labels`) is; ValueError(message) when it is none."""
        if len(values) != 1:
            raise ValueError(f"task needs exactly one label, the row has {len(values)}")
        return self.from_value(values[0])

    def from_value(self, value: Any) -> Any:
        """One raw label value as this shape holds it; ValueError(message) when it cannot be."""
        return value

    def key(self, label: Any) -> Any:
        """What two labels compare equal by (accuracy: a set's order does not count)."""
        return label


class OneClass(LabelShape):
    name, description = "class", "one class"


class ClassSet(LabelShape):
    name, description = "classes", "a set of classes"

    def from_cell(self, raw: str, separator: str) -> list[str]:
        return [x.strip() for x in raw.split(separator) if x.strip()]

    def from_strings(self, values: Sequence[str]) -> list[str]:
        return list(values)

    def key(self, label: Any) -> frozenset:
        return frozenset(label or ())


class Number(LabelShape):
    name, description = "number", "a number"

    def from_value(self, value: Any) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"label must be a number, got {value!r}") from None


class Tags(LabelShape):
    name, description, per_word = "tags", "a tag per word", True


CLASS, CLASSES, NUMBER, TAGS = OneClass(), ClassSet(), Number(), Tags()


def describe_shape(name: str) -> str:
    """How messages name the label shape `name` ("a number")."""
    return LABEL_SHAPES[name].description if name in LABEL_SHAPES else name


@dataclass(frozen=True)
class InputField:
    """One input an example holds: its name (the `Example` input and the `columns` key), what its value is (a text,
    a list of texts or a list of words) and whether every example has it."""

    name: str
    value: Literal["text", "texts", "words"] = "text"
    required: bool = True


class InputShape:
    """What an example holds: a text (and, for a pair task, a second text), words, or a text and its segments."""

    name: str = ""
    input_fields: tuple[InputField, ...] = ()  # what its examples hold, in the order records show them

    def fields(self, item: Any, pair: bool) -> dict[str, Any]:
        """`Example` fields of one raw prediction input; ValueError(message) when it is not one."""
        raise NotImplementedError

    def sample(self, pair: bool) -> Any:
        """One raw input of this shape, for checking an exported model."""
        raise NotImplementedError


class Text(InputShape):
    name, input_fields = "text", (InputField("text"), InputField("text_b", required=False))

    def fields(self, item: Any, pair: bool) -> dict[str, Any]:
        if not pair:
            return {"text": str(item)}
        parts = item.split("\t") if isinstance(item, str) else list(item)
        if len(parts) != 2:
            raise ValueError("takes text pairs: two texts separated by a tab")
        return {"text": parts[0], "text_b": parts[1]}

    def sample(self, pair: bool) -> Any:
        if pair:
            return ("The patient denies chest pain.", "The patient has chest pain.")
        return "Inhibition of the kinase by the compound reduced tumour growth."


class Words(InputShape):
    """Words: a raw string is split by `split_words`."""

    name, input_fields = "words", (InputField("tokens", "words"),)

    def fields(self, item: Any, pair: bool) -> dict[str, Any]:
        return {"tokens": [w for w, _, _ in split_words(item)] if isinstance(item, str) else list(item)}

    def sample(self, pair: bool) -> Any:
        return ["Aspirin", "reduced", "the", "risk", "of", "myocardial", "infarction", "."]


class Segments(InputShape):
    """A text and a list of texts, its segments (a question and its candidate answers): the raw input is one string,
    the text and then each segment separated by tabs, or a sequence (text, segment, segment, ...)."""

    name, input_fields = "segments", (InputField("text"), InputField("segments", "texts"))

    def fields(self, item: Any, pair: bool) -> dict[str, Any]:
        parts = item.split("\t") if isinstance(item, str) else list(item)
        if len(parts) < 2:
            raise ValueError("takes a text and its segments, separated by tabs")
        return {"text": str(parts[0]), "segments": [str(p) for p in parts[1:]]}

    def sample(self, pair: bool) -> Any:
        return ["Which drug is an anticoagulant?", "Warfarin", "Metformin", "Salbutamol"]


TEXT, WORDS, SEGMENTS = Text(), Words(), Segments()
