"""The task definition schema: one YAML file in `task_defs/` becomes one `TaskDef`.

Validation here is structural (types, unknown fields, label consistency). Whether the reader
and metric names exist and whether the data files are present is checked by
`mtbio.tasks.loading`, which knows the registries and the data directory.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mtbio.errors import MtbioError
from mtbio.tasks.kinds import TaskKind, task_kind

SPLITS = ("train", "dev", "test")


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


class SlidingWindow(BaseModel):
    """A text longer than `max_length` tokens is read as overlapping windows of `max_length` tokens, each encoded
    on its own (for encoders limited to 512 positions). Sentence-level heads pool each window and combine the
    windows' vectors (`aggregate`); a tagging head tags each word from the first window holding its first
    sub-word."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stride: int = Field(64, ge=0)  # tokens a window repeats from the one before it (the tokenizer's `stride`)
    aggregate: Literal["mean", "max"] = "mean"  # how a sentence-level head combines its windows' pooled vectors
    max_windows: int = Field(16, ge=1)  # a text needing more is cut after this many (counted as truncated)

    def fits(self, max_length: int) -> bool:
        """Whether windows of `max_length` tokens can repeat `stride` of them: less than half a window."""
        return self.stride < max_length // 2


class TaskDef(BaseModel):
    """A dataset and how to learn and score it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    type: str  # a registered task kind (mtbio.tasks.kinds)
    type_options: dict[str, Any] = Field(default_factory=dict)  # checked by the kind's own options model
    description: str = ""
    domain: str = "other"
    # benchmark task family, used by the BLURB score (macro average over families)
    category: Literal["ner", "pico", "relation", "similarity", "document", "qa", "nli", "other"] = "other"
    # reader name (see mtbio.data.readers) and how the reader finds fields in a row
    format: str
    columns: dict[str, int | str | list[int | str]] = Field(default_factory=dict)  # a list: a field of several texts
    reader_options: dict[str, Any] = Field(default_factory=dict)
    # split -> path (or list of paths) relative to the data directory; `all` + derived_split
    # for corpora without an official split
    files: dict[str, str | list[str]]
    derived_split: DerivedSplit | None = None
    labels: list[str] | None = None
    label_map: dict[str, str] = Field(default_factory=dict)
    negative_label: str | None = None
    metric: str = ""  # empty: the kind's default metric
    extra_metrics: list[str] = Field(default_factory=list)
    max_length: int = Field(128, ge=8, le=8192)  # long-context encoders (ModernBERT) take 8,192; a run truncates to
    # its encoder's positions and says so
    sliding_window: SlidingWindow | None = None  # None: a text is cut at max_length
    tagging_scheme: Literal["IOB2", "IO", "IOBES"] | None = None
    entity_markers: Literal["keep", "strip"] = "keep"
    threshold: float = Field(0.5, gt=0, lt=1)
    dropout: float = Field(0.1, ge=0, lt=1)
    # sentence-level heads: a pooling registered in mtbio.model.poolings (checked by name when loaded): [CLS]
    # directly (MT-BERT), the encoder's own pooler, or the mean of the tokens
    pooling: str = "cls"
    loss_weight: float = Field(1.0, gt=0)
    credentialed: bool = False
    access: str = ""
    citation: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, name: str) -> str:
        try:
            task_kind(name)
        except MtbioError as error:
            raise ValueError(str(error)) from None
        return name

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
        kind = self.kind
        if not self.metric:
            object.__setattr__(self, "metric", kind.default_metric)
        if ("all" in self.files) != (self.derived_split is not None):
            raise ValueError("derived_split: files: {all: ...} needs derived_split, and derived_split needs files: {all: ...}")
        if kind.min_labels == 0:
            if self.labels:
                raise ValueError(f"labels: a {self.type} task has no labels")
        else:
            if not self.labels:
                raise ValueError(f"labels: a {self.type} task needs labels")
            if len(set(self.labels)) != len(self.labels):
                raise ValueError("labels: labels contain duplicates")
            if len(self.labels) < kind.min_labels:
                raise ValueError(f"labels: a {self.type} task needs at least {kind.min_labels} labels")
        if kind.options is None and self.type_options:
            raise ValueError(f"type_options: a {self.type} task takes no type_options")
        try:
            kind.options_of(self)
        except ValidationError as error:
            first = error.errors()[0]
            raise ValueError(f"type_options.{describe_type_error(first['loc'])}: {first['msg']}") from None
        if self.sliding_window is not None and not self.sliding_window.fits(self.max_length):
            raise ValueError(f"sliding_window.stride: {self.sliding_window.stride} repeats half a window or more "
                             f"(max_length {self.max_length}); take it below {self.max_length // 2}")
        for problem in kind.problems(self):
            raise ValueError(problem)
        if self.negative_label is not None and self.negative_label not in (self.labels or []):
            raise ValueError(f"negative_label: '{self.negative_label}' is not in labels")
        for raw, mapped in self.label_map.items():
            if mapped not in self.label_list:
                raise ValueError(f"label_map: maps '{raw}' to '{mapped}', which is not in labels")
        return self

    @property
    def kind(self) -> TaskKind:
        """What the task's type means at every stage (`mtbio.tasks.kinds`)."""
        return task_kind(self.type)

    @property
    def label_list(self) -> list[str]:
        """The label vocabulary the head predicts over (tags for tagging tasks)."""
        return self.kind.label_list(self)

    @property
    def has_splits(self) -> list[str]:
        return list(SPLITS) if "all" in self.files else [s for s in SPLITS if s in self.files]


def has_tag_prefix(tag: str) -> bool:
    """Whether `tag` is a prefixed tag (`B-Chemical`) rather than an entity type."""
    return len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES"


def expand_entity_types(types: list[str], scheme: str) -> list[str]:
    """['Chemical'] + IOB2 → ['O', 'B-Chemical', 'I-Chemical']."""
    prefixes = {"IOB2": "BI", "IO": "I", "IOBES": "BIES"}[scheme]
    return ["O"] + [f"{p}-{t}" for t in types for p in prefixes]


def describe_type_error(loc: tuple[Any, ...]) -> str:
    """Turn a pydantic error location into a dotted field name."""
    return ".".join(str(x) for x in loc) if loc else "(top level)"
