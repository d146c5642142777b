"""The unit every reader produces and every later stage consumes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

# classification: one label; multilabel: the positive labels; tagging: one tag per token;
# regression: a float; None for unlabelled input (prediction on raw text).
Label = Union[str, float, list[str], None]


@dataclass(init=False)
class Example:
    """One labelled instance, as read from disk, before tokenization.

    `inputs` holds what the task's kind declares its examples hold (`mtbio.tasks.shapes.InputField`), by field
    name; a field an example lacks is absent. The shipped fields read as attributes: `text` (the single text or
    the first text of a pair), `text_b` (the second text of a pair) and `tokens` (the words a tagging example
    holds instead of text, with one tag per word in `label`); `Example(uid, label, text=...)` sets them.
    `group` is the document id (PMID, trial id…) used for document-level metrics and for
    deterministic splits of corpora without an official split. `origin` is "file:line", used
    in error messages.
    """

    uid: str
    label: Label
    inputs: dict[str, Any]
    group: str | None
    origin: str
    meta: dict[str, str]

    def __init__(self, uid: str, label: Label, text: str | None = None, text_b: str | None = None,
                 tokens: list[str] | None = None, group: str | None = None, origin: str = "",
                 meta: dict[str, str] | None = None, inputs: Mapping[str, Any] | None = None) -> None:
        self.uid, self.label, self.group, self.origin = uid, label, group, origin
        self.meta = dict(meta or {})
        given = {"text": text, "text_b": text_b, "tokens": tokens, **(inputs or {})}
        self.inputs = {name: value for name, value in given.items() if value is not None}

    @property
    def text(self) -> str | None:
        return self.inputs.get("text")

    @property
    def text_b(self) -> str | None:
        return self.inputs.get("text_b")

    @property
    def tokens(self) -> list[str] | None:
        return self.inputs.get("tokens")
