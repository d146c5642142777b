"""The unit every reader produces and every later stage consumes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# classification: one label; multilabel: the positive labels; tagging: one tag per token;
# regression: a float; None for unlabelled input (prediction on raw text).
Label = Union[str, float, list[str], None]


@dataclass
class Example:
    """One labelled instance, as read from disk, before tokenization.

    `text` holds the single text or the first text of a pair; `text_b` the second text of a pair.
    Tagging examples carry `tokens` (words) instead of text, with one tag per word in `label`.
    `group` is the document id (PMID, trial id…) used for document-level metrics and for
    deterministic splits of corpora without an official split. `origin` is "file:line", used
    in error messages.
    """

    uid: str
    label: Label
    text: str | None = None
    text_b: str | None = None
    tokens: list[str] | None = None
    group: str | None = None
    origin: str = ""
    meta: dict[str, str] = field(default_factory=dict)
