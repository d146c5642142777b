"""The task definition schema: one YAML file in `task_defs/` becomes one `TaskDef`.

Validation here is structural (types, unknown fields, label consistency). Whether the reader
and metric names exist and whether the data files are present is checked by
`mtbio.tasks.loading`, which knows the registries and the data directory.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASK_TYPES = ("regression", "classification", "multilabel", "tagging")
SPLITS = ("train", "dev", "test")
TaskType = Literal["regression", "classification", "multilabel", "tagging"]


class DerivedSplit(BaseModel):
    """A deterministic split for corpora without an official one.

    Each example's `group` (document id) is hashed with `seed`; the hash decides the split, so
    all examples of a document land in the same split and the split never depends on file order,
    the Python hash seed or the machine.
    """

    model_config = ConfigDict(extra="forbid")

    train: float = Field(0.8, ge=0, le=1)
    dev: float = Field(0.1, ge=0, le=1)
    test: float = Field(0.1, ge=0, le=1)
    seed: int = 13

    @model_validator(mode="after")
    def _sums_to_one(self) -> "DerivedSplit":
        total = self.train + self.dev + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"train + dev + test must be 1.0, got {total:g}")
        return self


class TaskDef(BaseModel):
    """A dataset and how to learn and score it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    type: TaskType
    description: str = ""
    domain: str = "other"
    # benchmark task family, used by the BLURB score (macro average over families)
    category: Literal["ner", "pico", "relation", "similarity", "document", "qa", "nli", "other"] = "other"
    # reader name (see mtbio.data.readers) and how the reader finds fields in a row
    format: str
    columns: dict[str, int | str] = Field(default_factory=dict)
    reader_options: dict[str, Any] = Field(default_factory=dict)
    # split -> path (or list of paths) relative to the data directory; `all` + derived_split
    # for corpora without an official split
    files: dict[str, str | list[str]]
    derived_split: DerivedSplit | None = None
    labels: list[str] | None = None
    label_map: dict[str, str] = Field(default_factory=dict)
    negative_label: str | None = None
    metric: str
    extra_metrics: list[str] = Field(default_factory=list)
    max_length: int = Field(128, ge=8, le=4096)
    tagging_scheme: Literal["IOB2", "IO", "IOBES"] | None = None
    entity_markers: Literal["keep", "strip"] = "keep"
    threshold: float = Field(0.5, gt=0, lt=1)
    dropout: float = Field(0.1, ge=0, lt=1)
    # sentence-level heads: read [CLS] directly (MT-BERT) or the encoder's own pooler, as
    # `AutoModelForSequenceClassification` does (BERT: [CLS] → dense → tanh)
    pooling: Literal["cls", "pooler"] = "cls"
    loss_weight: float = Field(1.0, gt=0)
    credentialed: bool = False
    access: str = ""
    citation: str = ""

    @field_validator("files")
    @classmethod
    def _known_splits(cls, files: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        allowed = set(SPLITS) | {"all"}
        unknown = sorted(set(files) - allowed)
        if unknown:
            raise ValueError(f"unknown split(s) {unknown}; use train, dev, test (or all + derived_split)")
        if "all" in files and len(files) > 1:
            raise ValueError("'all' cannot be combined with train/dev/test files")
        if not files:
            raise ValueError("at least one split file is required")
        return files

    @model_validator(mode="after")
    def _consistent(self) -> "TaskDef":
        """Cross-field checks. Each message starts with "<field>: " so loaders can name the field."""
        if self.pooling == "pooler" and self.type == "tagging":
            raise ValueError("pooling: a tagging head reads every token; pooling applies to sentence-level tasks")
        if ("all" in self.files) != (self.derived_split is not None):
            raise ValueError("derived_split: files: {all: ...} needs derived_split, and derived_split needs files: {all: ...}")
        if self.type == "regression":
            if self.labels:
                raise ValueError("labels: a regression task has no labels")
        else:
            if not self.labels:
                raise ValueError(f"labels: a {self.type} task needs labels")
            if len(set(self.labels)) != len(self.labels):
                raise ValueError("labels: labels contain duplicates")
            if self.type == "classification" and len(self.labels) < 2:
                raise ValueError("labels: a classification task needs at least two labels")
        if self.type == "tagging" and self.tagging_scheme is None:
            raise ValueError("tagging_scheme: a tagging task needs tagging_scheme (IOB2, IO or IOBES)")
        if self.type != "tagging" and self.tagging_scheme is not None:
            raise ValueError("tagging_scheme: tagging_scheme applies to tagging tasks only")
        if self.negative_label is not None and self.negative_label not in (self.labels or []):
            raise ValueError(f"negative_label: '{self.negative_label}' is not in labels")
        for raw, mapped in self.label_map.items():
            if mapped not in self.label_list:
                raise ValueError(f"label_map: maps '{raw}' to '{mapped}', which is not in labels")
        return self

    @property
    def label_list(self) -> list[str]:
        """The label vocabulary the head predicts over (tags for tagging tasks)."""
        if self.type == "regression":
            return []
        labels = list(self.labels or [])
        if self.type == "tagging" and "O" not in labels and not any(_has_prefix(x) for x in labels):
            return expand_entity_types(labels, self.tagging_scheme or "IOB2")
        return labels

    @property
    def has_splits(self) -> list[str]:
        return list(SPLITS) if "all" in self.files else [s for s in SPLITS if s in self.files]


def _has_prefix(tag: str) -> bool:
    return len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES"


def expand_entity_types(types: list[str], scheme: str) -> list[str]:
    """['Chemical'] + IOB2 → ['O', 'B-Chemical', 'I-Chemical']."""
    prefixes = {"IOB2": "BI", "IO": "I", "IOBES": "BIES"}[scheme]
    return ["O"] + [f"{p}-{t}" for t in types for p in prefixes]


def describe_type_error(loc: tuple[Any, ...]) -> str:
    """Turn a pydantic error location into a dotted field name."""
    return ".".join(str(x) for x in loc) if loc else "(top level)"
