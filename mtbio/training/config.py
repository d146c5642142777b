"""The resolved configuration of a run: every CLI flag is a field here, and a YAML config file
uses the same names (dashes or underscores). Unknown keys are errors. The resolved config is
saved as `config.yaml` in the run directory; nothing is ever inherited from an old checkpoint."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mtbio.data.mixer import MIXERS
from mtbio.errors import MtbioError

REFINE_LR = 5e-5  # seed 004 section 4.2
FINETUNE_LR = 1e-5  # seed 004: fine-tuning a refined model uses a smaller learning rate


class RunConfig(BaseModel):
    """Options shared by refine and finetune (and recorded for every run)."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[str] = Field(default_factory=list)
    domain: str | None = None
    encoder: str | None = None
    from_run: str | None = None
    data_dir: str | None = None
    output: str | None = None
    task_defs: list[str] = Field(default_factory=list)

    epochs: int = Field(3, ge=1)
    max_steps: int | None = Field(None, ge=1)
    batch_size: int = Field(32, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    grad_accum: int = Field(1, ge=1)
    lr: float | None = Field(None, gt=0)
    warmup: float = Field(0.1, ge=0, lt=1)
    weight_decay: float = Field(0.01, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    optimizer: Literal["adamw", "adamax"] = "adamw"
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    seed: int = 42
    max_length: int | None = Field(None, ge=8)
    max_train_examples: int | None = Field(None, ge=1)

    mixer: str = "proportional"  # a name registered in mtbio.data.mixer.MIXERS
    temperature: float = Field(2.0, gt=0)
    temperature_cap: int | None = Field(None, ge=1)
    main_task: str | None = None
    aux_ratio: float = Field(1.0, gt=0)
    # length bucketing: each task's batches are cut from length-sorted windows of this many batches
    bucket_window: int = Field(200, ge=1)
    # tagging tasks: random batches run as packed rows (mtbio.data.packing) instead of bucketing
    packing: bool = True
    # each batch runs as this many length-sorted sub-batches whose gradients add up to the batch's
    sub_batches: int = Field(1, ge=1)
    # torch.compile the encoder (fuses its element-wise work; the first steps wait for compilation)
    compile: bool = False

    eval_every: int | None = Field(None, ge=1)
    eval_test: bool = False
    save_every: int | None = Field(None, ge=1)
    resume: bool = False
    skip_nonfinite: bool = False

    # fine-tuning stabilization and layer removal (seed 001; mtbio.training.stabilize)
    freeze_layers: int | None = Field(None, ge=0)
    layerwise_lr_decay: float | None = Field(None, gt=0, le=1)
    reinit_layers: int | None = Field(None, ge=1)
    drop_top_layers: int | None = Field(None, ge=1)
    no_bias_correction: bool = False
    patience: int | None = Field(None, ge=1)

    # seeds seed, seed+1, ..., seed+K-1; None: the command's default (finetune 1, pairwise/stilt 3)
    seeds: int | None = Field(None, ge=1)
    # sweeps (mtbio pairwise / mtbio stilt)
    dry_run: bool = False
    alpha: float = Field(0.05, gt=0, lt=1)
    min_delta: float = Field(0.01, ge=0)
    intermediate: list[str] = Field(default_factory=list)
    target: list[str] = Field(default_factory=list)

    @field_validator("mixer")
    @classmethod
    def _registered_mixer(cls, name: str) -> str:
        if name not in MIXERS:
            raise ValueError(f"unknown mixer strategy '{name}' (registered: {', '.join(MIXERS.names())})")
        return name

    def learning_rate(self, default: float) -> float:
        return self.lr if self.lr is not None else default


def read_config_file(path: Path | str) -> dict[str, Any]:
    """A YAML file of flag values (keys with dashes or underscores)."""
    from mtbio.tasks.loading import read_yaml

    data = read_yaml(Path(path)) or {}
    if not isinstance(data, dict):
        raise MtbioError(f"{path}: a config file is a mapping of option names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def build_config(file_values: dict[str, Any], cli_values: dict[str, Any], source: str = "config") -> RunConfig:
    """Defaults < config file < flags given on the command line."""
    merged = {**file_values, **cli_values}
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(x) for x in err["loc"])
            msg = "unknown option" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"{source}: '{key}': {msg}")
        raise MtbioError("\n".join(lines)) from None


def save_config(config: RunConfig, path: Path) -> None:
    path.write_text(yaml.safe_dump(config.model_dump(), sort_keys=False))
