"""Task kinds: what a task definition's `type` means at every stage, one registered unit per type.

A kind declares the shape of its examples (`inputs`: text, with an optional second text, or words) and
of their labels (`labels`), objects of `mtbio.tasks.shapes` that readers, metrics and `mtbio predict` ask
(never a kind's name). Everything else is the kind's own: the checks of a definition beyond the schema,
the label vocabulary, the features and labels featurization builds, the head, the trivial predictor, its
linear probe on frozen features, the default metric, what a prediction record adds, and the export.

The shipped kinds are modules of `mtbio.kinds` (one file each, above the model layer, since each
holds its head). The layers below reach a kind through `task_kind(name)`, which imports that
package on first use; they never import it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, Sequence

from pydantic import BaseModel

from mtbio.registry import Registry
from mtbio.tasks.shapes import TEXT, InputShape, LabelShape

SHIPPED_KINDS = "mtbio.kinds"


@dataclass(frozen=True)
class ExportSpec:
    """How a task of this kind leaves mtbio: the class that holds its head (an `AutoModelFor*`, or
    `SentenceTransformer` in that library's layout), the `pipeline` task that runs it and the config's
    `problem_type` (None: the class's default)."""

    auto_class: str
    pipeline: str
    problem_type: str | None = None
    layout: Literal["transformers", "sentence-transformers"] = "transformers"


class TaskKind:
    """A task type. Subclass in one module of `mtbio.kinds` (or a plugin) and decorate with `register_kind`.

    Class attributes declare the shapes; the methods below have defaults for sentence-level kinds.
    Methods that need the data, metric or model layers are implemented in the kind's own module."""

    name: ClassVar[str]
    inputs: ClassVar[InputShape] = TEXT
    labels: ClassVar[LabelShape]
    min_labels: ClassVar[int] = 1  # 0: the kind has no labels (a score)
    pools: ClassVar[bool] = True  # its head reads one pooled position per example (`pooling` applies)
    probe: ClassVar[Any] = None  # its linear probe on frozen features (`mtbio.model.probes`); None: no probe
    default_metric: ClassVar[str]
    options: ClassVar[type[BaseModel] | None] = None  # the model of a definition's `type_options`
    export: ClassVar[ExportSpec | None] = None  # None: no transformers class carries this head
    pair_form: ClassVar[str | None] = None  # a pair classifier's or regression's form, `--pair-form`: cross (encoded together) or bi
    padded_columns: ClassVar[dict[str, int]] = {}  # its featurized columns with one value per token → padding value
    # what its featurized `labels_lost` column counts (`mtbio.data.featurize.LABELS_LOST`), as the warning says it
    lost_labels: ClassVar[str] = "labels were cut off"

    def check(self, task: Any) -> list[str]:
        """Problems of a definition beyond the schema's, each "<field>: message"."""
        return []

    def problems(self, task: Any) -> list[str]:
        """Every problem of a definition that depends on its kind: the shared ones, then `check`'s."""
        shared = []
        if task.pooling != "cls" and not self.pools:
            shared.append(f"pooling: a {self.name} head does not read one pooled position; pooling applies to "
                          "sentence-level tasks")
        if task.sliding_window is not None and not (self.pools or self.labels.per_word):
            shared.append(f"sliding_window: a {self.name} head reads positions a window may cut off; sliding_window "
                          "applies to sentence-level and tagging tasks")
        if task.sliding_window is not None and task.pooling == "pooler":
            shared.append("sliding_window: pooling: pooler reads the encoder's pooler, one per text; use cls or mean")
        if task.tagging_scheme is not None and not self.labels.per_word:
            shared.append("tagging_scheme: tagging_scheme applies to tasks that tag words only")
        return shared + self.check(task)

    def with_pooling(self, task: Any, pooling: str) -> Any:
        """`task` with its head reading `pooling` (a kind that does not pool: `task` as it is)."""
        return task.model_copy(update={"pooling": pooling}) if self.pools else task

    def postprocess(self, text: Any, prediction: Any, probabilities: Any) -> dict[str, Any]:
        """Fields a prediction record of raw input `text` adds beside the prediction (tagging: its entities)."""
        return {}

    def check_label(self, raw: Any, example: Any, task: Any, name: Callable[..., str]) -> Any:  # pragma: no cover
        """An example's label as training uses it, or ValueError(message) naming what is wrong. `name(raw, what=)`
        maps one raw label through the task's `label_map` and checks it against its vocabulary."""
        raise NotImplementedError

    def label_notes(self, task: Any, label: Any) -> list[str]:
        """What is odd but accepted in one checked label, a short phrase each (tagging: an I- tag that continues no
        entity); a split's are counted and reported with the first example's place (`mtbio.data.loading`)."""
        return []

    def missing_labels(self, task: Any, labels: Sequence[Any]) -> list[str]:
        """The labels of the task's vocabulary that none of `labels` (a split's checked labels) holds; [] for a kind
        without a vocabulary of classes."""
        return []

    def typed_items(self, task: Any, labels: Sequence[Any]) -> set[tuple] | None:
        """The items a per-type table counts, each (example, type, ...) (`mtbio.evaluation.breakdown`); None: the
        kind has no per-type table."""
        return None

    def label_list(self, task: Any) -> list[str]:
        """The label vocabulary the head predicts over."""
        return list(task.labels or [])

    def options_of(self, task: Any) -> Any:
        """The definition's `type_options`, validated by the kind's `options` model."""
        return self.options.model_validate(task.type_options) if self.options is not None else None

    def features(self, tokenizer: Any) -> dict[str, Any]:  # pragma: no cover
        """The `datasets` features of `labels` and of any column the kind adds to the shared ones."""
        raise NotImplementedError

    def featurize(self, examples: Sequence[Any], task: Any, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:  # pragma: no cover
        """Columns (`mtbio.data.featurize`'s shared ones, `labels`, the kind's own) for a chunk of examples."""
        raise NotImplementedError

    def head(self, config: Any) -> Any:  # pragma: no cover
        """The head (`mtbio.model.heads.Head`) for a `HeadConfig` of this kind."""
        raise NotImplementedError

    def trivial_predictions(self, task: Any, train: Sequence[Any], scored: Sequence[Any]) -> list[Any]:  # pragma: no cover
        """What a model that learned only the label prior of `train` predicts for each example of `scored`."""
        raise NotImplementedError


TASK_KINDS: Registry[TaskKind] = Registry("task type")


def register_kind(cls: type[TaskKind]) -> type[TaskKind]:
    """Class decorator: register one instance of the kind under its `name`."""
    TASK_KINDS.register(cls.name)(cls())
    return cls


def task_kind(name: str) -> TaskKind:
    """The kind registered under `name` (the shipped kinds are imported on first use)."""
    if name not in TASK_KINDS:
        importlib.import_module(SHIPPED_KINDS)
    return TASK_KINDS.get(name)


def pair_form_kind(form: str, labels: Any = None) -> str:
    """The registered kind that reads pairs in `form` (cross, bi) with labels of the shape `labels` (None: any)."""
    importlib.import_module(SHIPPED_KINDS)
    for name in TASK_KINDS.names():
        kind = TASK_KINDS.get(name)
        if kind.pair_form == form and (labels is None or kind.labels is labels):
            return name
    raise KeyError(f"no task type reads pairs in the {form} form" + (f" with {labels.description} labels"
                                                                      if labels is not None else ""))


def kind_names() -> list[str]:
    """Every registered task type."""
    importlib.import_module(SHIPPED_KINDS)
    return TASK_KINDS.names()
