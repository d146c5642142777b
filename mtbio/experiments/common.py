"""Resolving what a stage works on: task definitions, data directory, output directory."""
from __future__ import annotations

import hashlib
from pathlib import Path

from mtbio.errors import MtbioError
from mtbio.experiments.study_config import StudyConfig
from mtbio.reporting.verdicts import Rule
from mtbio.tasks.loading import TaskCatalog, load_catalog, resolve_data_dir
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import AUTO_SEEDS, RunConfig


def catalog_for(config: RunConfig) -> TaskCatalog:
    return load_catalog(config.task_defs)


def resolve_tasks(config: RunConfig, catalog: TaskCatalog | None = None) -> list[TaskDef]:
    """`--tasks` (names or aliases such as bc5cdr) and/or `--domain` → task definitions."""
    catalog = catalog or catalog_for(config)
    if not config.tasks and not config.domain:
        raise MtbioError("name the tasks: --tasks a,b,c or --domain biomedical|clinical|...")
    return catalog.resolve(config.tasks, config.domain)


def data_dir_for(config: RunConfig) -> Path | None:
    return resolve_data_dir(config.data_dir)


def default_run_name(tasks: list[TaskDef], config: RunConfig) -> str:
    """Deterministic, so the same command with --resume finds the same directory."""
    names = [t.name for t in tasks]
    label = config.domain if config.domain and not config.tasks else "+".join(names)
    if len(label) > 60:
        label = f"{len(names)}tasks-" + hashlib.sha1("+".join(names).encode()).hexdigest()[:8]
    return f"{label}-seed{config.seed}"


def decision_rule(config: StudyConfig) -> Rule:
    """The rule a study's comparisons are judged by: --rule, --alpha, --min-delta, --correction, --spending, and
    the looks of adaptive seeds (--seeds first, --max-seeds last)."""
    looks = (int(config.seeds or AUTO_SEEDS), config.max_seeds) if config.max_seeds else None
    name, options = config.rule_spec()
    return Rule(name, options.alpha, options.min_delta, options.correction, options.spending, looks, config.primary)


def refuse_adaptive_seeds(config: StudyConfig, command: str) -> None:
    """Adaptive seeds are pairwise's and select's; any other study says so instead of ignoring them."""
    if config.max_seeds is not None:
        raise MtbioError(f"{command} runs a fixed number of seeds: give --seeds N (adaptive seeds, --seeds auto or "
                         "--max-seeds, are for pairwise and select)")


def train_examples_of(config: RunConfig, task: str) -> int | None:
    """The training cap of one task: its --task-examples entry, else --max-train-examples."""
    caps = {name: int(count) for name, _, count in (entry.partition("=") for entry in config.task_examples)}
    return caps.get(task, config.max_train_examples)
