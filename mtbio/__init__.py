"""mtbio: multi-task learning on biomedical and clinical text.

Layers, each importing only from those before it (ARCHITECTURE.md; tests/test_architecture.py):
task definitions (`mtbio.tasks`) → readers and featurization (`mtbio.data`) → metrics
(`mtbio.evaluation`) → shared encoder and heads (`mtbio.model`) → training loop (`mtbio.training`)
→ tables, verdicts and plots (`mtbio.reporting`) → stages and sweeps (`mtbio.experiments`) → CLI.
This module is the public facade on top: `mtbio.load` and the stages as functions
(`mtbio.refine`, `mtbio.finetune`, `mtbio.pairwise`, `mtbio.stilt`) taking the CLI's options as keywords.
"""
from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from mtbio.data.in_memory import DatasetTask
    from mtbio.experiments.predict import LoadedRun


def load(run_dir: Any, precision: str = "auto") -> "LoadedRun":
    """Load a run directory (encoder + heads) for prediction. Never unpickles. `precision`: `auto`
    (the run's training precision where the hardware has it), `no` (fp32) or `bf16`."""
    from mtbio.experiments.predict import load_run

    return load_run(run_dir, precision)


def task_from_dataset(dataset: Any, name: str, type: str, columns: dict[str, str], metric: str,
                      **fields: Any) -> "DatasetTask":
    """A `datasets.Dataset`/`DatasetDict` in memory as a task every command trains: its splits are
    written as parquet with a `format: hf` definition; pass `task.task_defs` and `task.data_dir` to
    the commands (`--task-defs`, `--data-dir`). See `mtbio.data.in_memory.task_from_dataset`."""
    from mtbio.data.in_memory import task_from_dataset as make

    return make(dataset, name, type, columns, metric, **fields)


def _config(options: dict[str, Any], study: bool = False) -> Any:
    """A RunConfig (a StudyConfig for a study) from keyword options named as the CLI's flags (underscores), `config=`
    a YAML file; a comma-separated string is accepted where the flag takes a list (`tasks="chemprot,ddi"`)."""
    from mtbio.experiments.study_config import StudyConfig
    from mtbio.training.config import build_config, flat_fields
    from mtbio.training.option_files import read_config_file

    config_file = options.pop("config", None)
    file_values = read_config_file(config_file) if config_file else {}
    for name, value in list(options.items()):
        field = flat_fields(StudyConfig).get(name)
        if isinstance(value, str) and field is not None and field.default_factory is list:
            options[name] = [v.strip() for v in value.split(",") if v.strip()]
    return build_config(file_values, {k: v for k, v in options.items() if v is not None}, source="keyword options",
                        model=StudyConfig if study else None)


def refine(**options: Any) -> tuple[Any, dict[str, Any]]:
    """`mtbio refine` from Python: the CLI's options as keywords (`tasks="chemprot,ddi"`, `data_dir=`,
    `max_train_examples=`, `config="run.yml"`, ...). Returns the run directory and its results.json."""
    from mtbio.experiments.refine import refine as run

    return run(_config(options))


def finetune(**options: Any) -> list[tuple[Any, dict[str, Any]]]:
    """`mtbio finetune` from Python (`tasks=` or `task=`, `from_run=` for `--from`, ...). Returns
    (run directory, results.json) per task and seed."""
    from mtbio.experiments.finetune import finetune as run

    if "task" in options:
        options["tasks"] = options.pop("task")
    return run(_config(options))


def pairwise(echo: Callable[[str], None] = print, **options: Any) -> tuple[Any, dict[str, Any] | None]:
    """`mtbio pairwise` from Python (`domain=` or `tasks=`, `seeds=`, `max_seeds=`, ...); progress lines
    go to `echo`. Returns the sweep directory and relations.json's content (None for `dry_run=True`)."""
    from mtbio.experiments.pairwise import pairwise as run

    return run(_config(options, study=True), echo)


def stilt(echo: Callable[[str], None] = print, **options: Any) -> tuple[Any, dict[str, Any] | None]:
    """`mtbio stilt` from Python (`intermediate=`, `target=`, ...); progress lines go to `echo`. Returns
    the sweep directory and stilt.json's content (None for `dry_run=True`)."""
    from mtbio.experiments.stilt import stilt as run

    return run(_config(options, study=True), echo)


def select(echo: Callable[[str], None] = print, **options: Any) -> dict[str, Any] | None:
    """`mtbio select` from Python (`target=`, `candidates=` task names or a domain, `top=`, `predictor=`,
    `verify=False` for --no-verify, ...): rank the candidates for the target, verify the best as pairs
    and compare the target with them, alone and with every candidate. Returns select.json's content
    (None for a dry run)."""
    from mtbio.experiments.select import select as run

    return run(_config(options, study=True), echo)[1]
