"""What `mtbio tasks list` and `mtbio tasks check` report: task tables and definition checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from mtbio.errors import MtbioError, TaskDefinitionError
from mtbio.data.loading import read_split, split_sizes, split_warnings
from mtbio.evaluation import metrics as _metrics  # noqa: F401  (registers the metric-name check)
from mtbio.tasks.loading import load_catalog, load_task_def, missing_message, missing_paths, split_paths
from mtbio.tasks.schema import SPLITS, TaskDef

NO_DATA_DIR = "no data directory (pass --data-dir or set MTBIO_DATA_DIR)"


@dataclass
class TaskRow:
    """One line of `mtbio tasks list`."""

    name: str
    type: str
    category: str
    domain: str
    labels: int
    sizes: dict[str, int] = field(default_factory=dict)
    status: str = "ok"


def tasks_table(data_dir: Path | None, domain: str | None = None, extra_dirs: Iterable[str | Path] = ()) -> str:
    """The `mtbio tasks list` table: every task (or a domain's) with sizes found under `data_dir`."""
    _require_dir(data_dir)
    catalog = load_catalog(extra_dirs)
    selected = catalog.resolve(domain=domain) if domain else list(catalog.tasks.values())
    return format_tasks_table([task_row(t, data_dir) for t in selected])


def _require_dir(data_dir: Path | None) -> None:
    if data_dir is not None and not data_dir.is_dir():
        raise MtbioError(f"data directory not found: {data_dir}")


def task_row(task: TaskDef, data_dir: Path | None) -> TaskRow:
    """The task's row: sizes of the splits found under `data_dir` and what is missing or broken."""
    row = TaskRow(task.name, task.type, task.category, task.domain, len(task.label_list))
    if data_dir is None:
        row.status = NO_DATA_DIR
        return row
    try:
        row.sizes = split_sizes(task, data_dir)
    except MtbioError as exc:
        row.status = f"error: {exc}"
        return row
    missing = missing_paths(task, data_dir)
    if missing:
        row.status = missing_message(task, missing, data_dir)
    return row


def format_tasks_table(rows: list[TaskRow]) -> str:
    """A plain-text table, one task per line."""
    header = ["task", "type", "category", "domain", "labels", "train", "dev", "test", "status"]
    lines = [header]
    for r in rows:
        sizes = [str(r.sizes[s]) if s in r.sizes else "-" for s in SPLITS]
        labels = str(r.labels) if r.labels else "-"
        lines.append([r.name, r.type, r.category, r.domain, labels, *sizes, r.status])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    right = {4, 5, 6, 7}
    out = []
    for line in lines:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells + [line[-1]]).rstrip())
    return "\n".join(out)


@dataclass
class CheckResult:
    """Outcome of `check_task_file`: problems (one line each) or a one-line summary, and warnings (one line each)
    about data that reads but is likely a mistake."""

    problems: list[str]
    summary: str
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_task_file(path: Path, data_dir: Path | None) -> CheckResult:
    """Validate a task definition and, given a data directory, every split of its data.

    Checks, in order: YAML syntax and duplicate keys, the schema (types, unknown fields, label
    consistency), reader/metric names and the reader's columns/options, that the data files
    exist, and that every split reads cleanly with valid labels.
    """
    _require_dir(data_dir)
    try:
        task = load_task_def(path)
    except TaskDefinitionError as exc:
        return CheckResult(str(exc).splitlines(), "")
    if data_dir is None:
        return CheckResult([], f"ok: {task.name} ({task.type}, format {task.format}); data not checked: {NO_DATA_DIR}")
    problems = []
    for key in task.files:
        for missing in [p for p in split_paths(task, key, data_dir) if not p.exists()]:
            problems.append(str(TaskDefinitionError(path, task.name, f"files.{key}",
                                                    missing_message(task, [missing], data_dir))))
    sizes: dict[str, int] = {}
    warnings: list[str] = []
    for split in task.has_splits:
        if any(not p.exists() for p in split_paths(task, split, data_dir)):
            continue
        try:
            examples = read_split(task, split, data_dir)
            sizes[split] = len(examples)
            warnings += split_warnings(task, split, examples)
        except MtbioError as exc:
            problems.append(f"task '{task.name}' {split}: {exc}")
            if task.derived_split is not None:
                break  # the same files back every derived split: one report is enough
    counts = ", ".join(f"{s} {n}" for s, n in sizes.items())
    return CheckResult(problems, f"ok: {task.name} ({task.type}, format {task.format}): {counts}", warnings)
