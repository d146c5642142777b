"""The transfer predictors' options models by predictor name (`--predictor '{name: fisher, examples: 24}'`); the
predictors themselves are `predictors.py`, whose `register_predictor(..., options=)` adds a new one's here. Kept apart
so that a study's config is checked, and `--help` shown, without importing what the predictors run (torch)."""
from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from mtbio.registry import Registry, validate_options


class PredictorOptions(BaseModel):
    """A predictor's options (none by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class JointOptions(PredictorOptions):
    """lookahead and cosine: how the affinity probe measures during the joint run."""

    every: int = Field(100, ge=1, description="optimizer steps between measurements")
    batch_size: int = Field(32, ge=1, description="examples per task in each measurement batch")
    split: Literal["train", "dev"] = Field("train", description="where the lookahead measures the target's loss")


class SampleOptions(PredictorOptions):
    examples: int = Field(64, ge=1, description="training examples read per task (a deterministic sample)")


class FisherOptions(SampleOptions):
    head_steps: int = Field(50, ge=1, description="optimizer steps of each task's new head before the squared "
                            "gradients are taken")


PREDICTOR_OPTIONS: Registry[type[PredictorOptions]] = Registry("transfer predictor")
for _name, _model in (("lookahead", JointOptions), ("cosine", JointOptions), ("size_ratio", PredictorOptions),
                      ("same_type", PredictorOptions), ("text_similarity", SampleOptions), ("fisher", FisherOptions)):
    PREDICTOR_OPTIONS.register(_name)(_model)


def predictor_options(name: str, values: Mapping[str, Any]) -> PredictorOptions:
    """Predictor `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(PREDICTOR_OPTIONS.get(name), values, f"predictor '{name}'")
