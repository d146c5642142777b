"""The launchers by name (`--launcher`) and each one's options model; `launchers.py` runs the cells. Kept apart so
that a config is checked, and `--help` shown, without importing what the launchers run (torch, Ray, submitit)."""
from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mtbio.registry import Registry, validate_options


class LauncherOptions(BaseModel):
    """A launcher's options (none by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalOptions(LauncherOptions):
    parallel: int | Literal["auto"] = Field(1, description="cells at once, one process each (auto: a process per GPU, else one "
                                "per core)")

    @field_validator("parallel")
    @classmethod
    def _positive_parallel(cls, value: int | str) -> int | str:
        if value != "auto" and (not isinstance(value, int) or value < 1):
            raise ValueError("--parallel must be at least 1 (or auto)")
        return value


class ClusterOptions(LauncherOptions):
    cpus: int = Field(1, ge=1, description="CPU cores per cell")
    gpus: int = Field(0, ge=0, description="GPUs per cell")


class RayOptions(ClusterOptions):
    address: str | None = Field(None, description="address of a running Ray cluster (None: a local Ray instance)")


class SlurmOptions(ClusterOptions):
    config: str | None = Field(None, description="YAML file of submitit executor parameters")
    partition: str | None = Field(None, description="partition")
    time: int | None = Field(None, ge=1, description="time limit per cell in minutes")
    account: str | None = Field(None, description="account to charge")


LAUNCHERS: Registry[type[LauncherOptions]] = Registry("launcher")
LAUNCHERS.register("local")(LocalOptions)
LAUNCHERS.register("ray")(RayOptions)
LAUNCHERS.register("slurm")(SlurmOptions)


def launcher_options(name: str, values: Mapping[str, Any]) -> LauncherOptions:
    """Launcher `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(LAUNCHERS.get(name), values, f"launcher '{name}'")
