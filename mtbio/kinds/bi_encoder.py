"""Bi-encoder similarity: the two texts of a pair encoded on their own, pooled (mean over tokens by default),
their cosine the prediction, trained with a squared error against the label scaled onto [0, 1] (how
sentence encoders are trained: sentence-transformers' `CosineSimilarityLoss`).

The head has no weights, so before the first step it already computes the encoder's zero-shot cosine
(`mtbio tasks baselines`' `cosine-mean`): fine-tuning starts from that solution rather than from a random
head on [CLS]. `type_options: {label_range: [LOW, HIGH], pooling: mean|cls}`: the labels' scale (required;
BIOSSES [0, 4], STS [0, 5]); a prediction is LOW + cosine × (HIGH − LOW). Metrics and the trivial predictor
are regression's. Exported in the sentence-transformers layout: `SentenceTransformer(DIR).encode(...)`
gives embeddings whose cosine is this head's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mtbio.data.example import Example
from mtbio.data.featurize import segment_features, separate_text_columns
from mtbio.data.readers import is_pair_task
from mtbio.kinds.regression import mean_label, number_label, number_labels
from mtbio.model.probes import NumberProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import NUMBER

if TYPE_CHECKING:
    from mtbio.kinds.heads.bi_encoder import CosineHead
    from mtbio.model.heads import HeadConfig


class BiEncoderOptions(BaseModel):
    """`type_options` of a bi_encoder task."""

    model_config = ConfigDict(extra="forbid")

    label_range: tuple[float, float] = Field(description="the labels' lowest and highest possible values")
    pooling: Literal["mean", "cls"] = Field("mean", description="a text's embedding: the mean of its tokens, or [CLS]")

    @model_validator(mode="after")
    def _ordered(self) -> "BiEncoderOptions":
        if self.label_range[0] >= self.label_range[1]:
            raise ValueError(f"label_range: the lowest value comes first and is below the highest, not "
                             f"{list(self.label_range)}")
        return self


class SeparatePair(TaskKind):
    """A kind whose pair's two texts are encoded on their own (`separate_text_columns`): its check that a task
    reads a pair, its features and featurizing. Labels are scores; a kind of other labels sets `label_type` (the
    `datasets` value type) and `pair_labels`."""

    pools = False
    label_type: ClassVar[str] = "float32"

    def check(self, task: TaskDef) -> list[str]:
        if not is_pair_task(task):
            return [f"columns: a {self.name} task reads a pair of texts; name the second in columns: {{text_b: ...}}"]
        return []

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import Value

        return {"labels": Value(self.label_type), **segment_features()}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns = separate_text_columns(chunk, task, tokenizer, max_length)
        columns["labels"] = self.pair_labels(chunk, task)
        return columns

    def pair_labels(self, chunk: Sequence[Example], task: TaskDef) -> list[Any]:
        """The `labels` column of `chunk`."""
        return number_labels(chunk)


@register_kind
class BiEncoder(SeparatePair):
    name = "bi_encoder"
    labels = NUMBER
    probe = NumberProbe()
    min_labels = 0
    default_metric = "pearson"
    options = BiEncoderOptions
    export = ExportSpec("SentenceTransformer", "sentence-similarity", layout="sentence-transformers")

    def head(self, config: HeadConfig) -> CosineHead:
        from mtbio.kinds.heads.bi_encoder import CosineHead

        options = BiEncoderOptions.model_validate(config.type_options)
        return CosineHead(config, options.label_range, options.pooling)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> float:
        return number_label(raw, task)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [mean_label(task, train)] * len(scored)
