"""Loading task definitions from YAML, finding them by name or domain, and checking them.

YAML is parsed strictly: duplicate keys are errors (PyYAML silently keeps the last one),
unknown fields and wrong types are errors, and every message names the file, the task and
the field.
"""
from __future__ import annotations

import importlib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from pydantic import ValidationError

from mtbio.errors import MissingDataError, MtbioError, TaskDefinitionError
from mtbio.run_dir import PackedCell, RunDir, saved_cell
from mtbio.tasks.schema import SPLITS, TaskDef, describe_type_error

# The built-in definitions: inside the installed package (wheels, `pip install .`), else the
# repository's top-level task_defs/ (a source checkout or an editable install).
_INSTALLED_TASK_DEFS = Path(__file__).resolve().parents[1] / "task_defs"
BUILTIN_TASK_DEFS = (_INSTALLED_TASK_DEFS if _INSTALLED_TASK_DEFS.is_dir()
                     else Path(__file__).resolve().parents[2] / "task_defs")
SHIPPED_TASK_DEFS = (BUILTIN_TASK_DEFS.resolve(), Path(__file__).resolve().parents[1])  # + the package's samples
DOMAINS_FILE = "domains.yml"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys, naming the line."""


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping key given twice (PyYAML would silently keep the last value)."""

    def __init__(self, key: Any, first_line: int, mark: yaml.Mark):
        self.key = key
        super().__init__(None, None, f"duplicate key '{key}' (first at line {first_line})", mark)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise DuplicateKeyError(key, seen[key], key_node.start_mark)
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path, text: str | None = None) -> Any:
    """Parse a YAML file strictly (or `text`, the file's content kept elsewhere); raise TaskDefinitionError naming
    the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8") if text is None else text
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskDefinitionError(path, None, None, f"cannot read: {exc}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        task = _guess_task_name(text)
        field = str(exc.key) if isinstance(exc, DuplicateKeyError) else None
        raise TaskDefinitionError(path, task, field, f"{where}{problem}") from None


def _guess_task_name(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip().strip("'\"") or None
    return None


def load_task_def(path: Path | str, text: str | None = None) -> TaskDef:
    """Load one task definition (`text`: its content, kept in a study's cells.jsonl); all schema problems are
    reported at once, one per line."""
    path = Path(path)
    data = read_yaml(path, text)
    if not isinstance(data, dict):
        raise TaskDefinitionError(path, None, None, "expected a mapping of task fields at the top level")
    name = data.get("name") if isinstance(data.get("name"), str) else None
    try:
        task = TaskDef.model_validate(data)
    except ValidationError as exc:
        errors = [TaskDefinitionError(path, name, *_field_and_message(e["loc"], _explain(e))) for e in exc.errors()]
        raise TaskDefinitionErrors(errors) from None
    _check_registered_names(path, task)
    if any(path.resolve().is_relative_to(shipped) for shipped in SHIPPED_TASK_DEFS):
        _check_files_stay_inside(path, task)
    return task


def _check_files_stay_inside(path: Path, task: TaskDef) -> None:
    """A shipped definition names files under the data directory only: no absolute path, no `..`.
    (A user's own definition may point anywhere on purpose.)"""
    for split, value in task.files.items():
        for name in [value] if isinstance(value, str) else list(value):
            if Path(name).is_absolute() or ".." in Path(name).parts:
                raise TaskDefinitionError(path, task.name, f"files.{split}", f"'{name}' leaves the data directory; "
                                          "a shipped definition names files relative to it")


def _explain(error: dict) -> str:
    """Pydantic's message, plus the fix when YAML turned an unquoted word into a boolean."""
    if isinstance(error.get("input"), bool) and error["type"].startswith("string"):
        return (f"{error['msg']}, got the boolean {str(error['input']).lower()}: YAML reads unquoted "
                "yes/no/on/off/true/false as booleans; quote it (\"yes\")")
    return str(error["msg"])


class TaskDefinitionErrors(TaskDefinitionError):
    """Several problems in one definition; str() gives one line per problem."""

    def __init__(self, errors: list[TaskDefinitionError]):
        self.errors = errors
        first = errors[0]
        super().__init__(first.path, first.task, first.field, first.message)
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


def _clean(msg: str) -> str:
    return msg.removeprefix("Value error, ")


def _field_and_message(loc: tuple[Any, ...], msg: str) -> tuple[str, str]:
    """The field a pydantic error is about; cross-field checks put it in front of the message."""
    msg = _clean(msg)
    if not loc:
        match = re.match(r"([a-z_][a-z0-9_.]*): (.+)", msg, re.DOTALL)
        if match:
            return match.group(1), match.group(2)
    return describe_type_error(loc), msg


def saved_task_fields(run_dir: Path | str, task: str) -> dict[str, Any]:
    """The fields of the definition a run saved for `task` (its tasks/<task>.yml) as written, not validated: reports
    and sweep status read them from runs whose definitions may predate today's schema."""
    path = RunDir(run_dir).tasks_dir / f"{task}.yml"
    saved = saved_cell(run_dir)
    data = read_yaml(path, saved.task_texts().get(task) if isinstance(saved, PackedCell) else None)
    if not isinstance(data, dict):
        raise TaskDefinitionError(path, task, None, "expected a mapping of task fields at the top level")
    return data


def load_run_tasks(run_dir: Path | str) -> dict[str, TaskDef]:
    """The resolved task definitions a run saved (its tasks/, or its line of a study's cells.jsonl), by name."""
    saved = saved_cell(run_dir)
    if isinstance(saved, PackedCell):
        tasks_dir = RunDir(run_dir).tasks_dir
        return {t.name: t for t in (load_task_def(tasks_dir / f"{name}.yml", text)
                                    for name, text in saved.task_texts().items())}
    return {t.name: t for t in (load_task_def(p) for p in RunDir(run_dir).task_files())}


# Checks of the names a definition refers to (format, metric), registered by the layers that own
# those registries when they are imported, so this layer imports nothing above it: the modules are
# imported by name before the first check, so a definition loaded on its own is checked in full.
# Each returns (field, message) problems.
NameCheck = Callable[[TaskDef], list[tuple[str, str]]]
NAME_CHECKS: list[NameCheck] = []
CHECKING_MODULES = ("mtbio.data.readers", "mtbio.evaluation.metrics", "mtbio.model.poolings")


def register_name_check(check: NameCheck) -> NameCheck:
    """Run `check` on every task definition loaded from now on."""
    NAME_CHECKS.append(check)
    return check


def _check_registered_names(path: Path, task: TaskDef) -> None:
    for module in CHECKING_MODULES:
        importlib.import_module(module)
    problems = [problem for check in NAME_CHECKS for problem in check(task)]
    if problems:
        raise TaskDefinitionErrors([TaskDefinitionError(path, task.name, f, m) for f, m in problems])


# The catalog: every task definition we can see, plus named domains


@dataclass
class TaskCatalog:
    """All task definitions found in the task-def directories, and the named domains."""

    tasks: dict[str, TaskDef] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)
    domains: dict[str, list[str]] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)

    def get(self, name: str) -> TaskDef:
        if name not in self.tasks:
            raise MtbioError(f"unknown task '{name}' (known: {', '.join(sorted(self.tasks))})")
        return self.tasks[name]

    def resolve(self, names: Iterable[str] = (), domain: str | None = None) -> list[TaskDef]:
        """Task names (or aliases such as `bc5cdr`) and/or a domain → task definitions, in order."""
        wanted: list[str] = []
        if domain is not None:
            if domain not in self.domains:
                raise MtbioError(f"unknown domain '{domain}' (known: {', '.join(sorted(self.domains))})")
            wanted.extend(self.domains[domain])
        for name in names:
            wanted.extend(self.aliases.get(name, [name]))
        unique = list(dict.fromkeys(wanted))
        return [self.get(n) for n in unique]


def task_def_dirs(extra: Iterable[Path | str] = ()) -> list[Path]:
    """The built-in `task_defs/`, then directories from MTBIO_TASK_DEFS (os.pathsep-separated), then `extra`."""
    dirs = [BUILTIN_TASK_DEFS]
    env = os.environ.get("MTBIO_TASK_DEFS", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path(p) for p in extra]
    return dirs


def load_catalog(extra_dirs: Iterable[Path | str] = ()) -> TaskCatalog:
    """Load every `*.yml` task definition and every `domains.yml` from the task-def directories.

    A later directory may add tasks and domains; redefining a task name is an error.
    """
    catalog = TaskCatalog()
    for directory in task_def_dirs(extra_dirs):
        if not directory.is_dir():
            raise MtbioError(f"task definition directory not found: {directory}")
        for path in sorted(directory.glob("*.y*ml")):
            if path.name in (DOMAINS_FILE, "domains.yaml"):
                _load_domains(path, catalog)
                continue
            task = load_task_def(path)
            if task.name in catalog.tasks:
                raise TaskDefinitionError(path, task.name, "name", f"also defined in {catalog.sources[task.name]}")
            catalog.tasks[task.name] = task
            catalog.sources[task.name] = path
    for group, members in list(catalog.domains.items()) + list(catalog.aliases.items()):
        for member in members:
            if member not in catalog.tasks:
                raise TaskDefinitionError(catalog.sources.get(f"@{group}", "domains.yml"), None, group,
                                          f"names unknown task '{member}'")
    return catalog


def _load_domains(path: Path, catalog: TaskCatalog) -> None:
    data = read_yaml(path) or {}
    if not isinstance(data, dict) or set(data) - {"domains", "aliases"}:
        raise TaskDefinitionError(path, None, None, "expected only the keys 'domains' and 'aliases'")
    for key in ("domains", "aliases"):
        groups = data.get(key) or {}
        if not isinstance(groups, dict):
            raise TaskDefinitionError(path, None, key, "expected a mapping of name → list of task names")
        for name, members in groups.items():
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                raise TaskDefinitionError(path, None, f"{key}.{name}", "expected a list of task names")
            target = catalog.domains if key == "domains" else catalog.aliases
            if name in target:
                raise TaskDefinitionError(path, None, f"{key}.{name}", "declared twice")
            target[name] = list(members)
            catalog.sources[f"@{name}"] = path


# ----------------------------------------------------------------------------------------------
# Data directory and data files


def resolve_data_dir(option: str | Path | None) -> Path | None:
    """`--data-dir`, else MTBIO_DATA_DIR, else None."""
    value = option if option is not None else os.environ.get("MTBIO_DATA_DIR")
    return Path(value).expanduser() if value else None


DATASET_SPLIT_PREFIX = "hf:"  # `files` entry naming a split of the dataset in reader_options.path, not a file


def is_dataset_split(path: Path) -> bool:
    """Whether a `files` entry names a dataset split (read by the `hf` format) rather than a file."""
    return path.name.startswith(DATASET_SPLIT_PREFIX)


def split_paths(task: TaskDef, split: str, data_dir: Path) -> list[Path]:
    """The files holding `split` (for derived splits: the files of `all`)."""
    key = "all" if "all" in task.files else split
    if key not in task.files:
        return []
    value = task.files[key]
    names = [value] if isinstance(value, str) else list(value)
    return [data_dir / n for n in names]


def missing_paths(task: TaskDef, data_dir: Path) -> list[Path]:
    """Declared data files (or directories) that are not under `data_dir`, in split order."""
    paths: list[Path] = []
    for split in ["all", *SPLITS]:
        if split in task.files:
            paths += [p for p in split_paths(task, split, data_dir)
                      if not p.exists() and not is_dataset_split(p) and p not in paths]
    return paths


def missing_message(task: TaskDef, missing: list[Path], data_dir: Path) -> str:
    """'missing X under DIR — `mtbio data get …` fetches it (repo @ commit)' where the packaged sources have every
    missing file; the manual step where one is not downloadable as is; else 'put files at …; <access>'."""
    from mtbio.tasks.sources import task_sources

    sources = task_sources(task) if not task.credentialed else None
    names = [p.relative_to(data_dir).as_posix() if p.is_relative_to(data_dir) else str(p) for p in missing]
    manual = {m.dest: m for m in sources.manual} if sources else {}
    fetched = {f.dest for f in sources.files} if sources else set()
    if sources and names and all(n in manual or any(d == n or d.startswith(n + "/") for d in fetched) for n in names):
        get = [n for n in names if n not in manual]
        route = []
        if get:
            command = f"mtbio data get {task.name} --data-dir {shlex.quote(str(data_dir))}"
            what = "the others" if len(get) < len(names) else "it" if len(get) == 1 else "them"
            route.append(f"`{command}` fetches {what} ({', '.join(sources.origins)})")
        route += [f"{n} is not downloadable as is: {manual[n].instructions(data_dir)}" for n in names if n in manual]
        return f"missing {', '.join(names)} under {data_dir} — {'; '.join(route)}"
    where = ", ".join(str(p) for p in missing)
    access = f"; {task.access}" if task.access else ""
    kind = " (credentialed)" if task.credentialed else ""
    public = "; public stand-ins train without credentials: --domain clinical-public" if task.credentialed else ""
    return f"missing{kind} — put files at {where}{access}{public}"


def require_data(task: TaskDef, data_dir: Path | None) -> None:
    """Raise MissingDataError naming the task, where to put its files and how to get credentialed data."""
    if data_dir is None:
        raise MissingDataError(f"task '{task.name}': no data directory; pass --data-dir or set MTBIO_DATA_DIR")
    missing = missing_paths(task, data_dir)
    if missing:
        raise MissingDataError(f"task '{task.name}': {missing_message(task, missing, data_dir)}")


def require_all_data(tasks: Iterable[TaskDef], data_dir: Path | None) -> None:
    """require_data for every task, raising one MissingDataError with a line per task that lacks files."""
    problems = []
    for task in tasks:
        try:
            require_data(task, data_dir)
        except MissingDataError as exc:
            problems.append(str(exc))
    if problems:
        raise MissingDataError("\n".join(problems))
