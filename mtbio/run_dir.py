"""A run's directory, the one owner of its layout:

    results.json     final scores, stage and throughput; written last, so a directory that has one is finished
    .training.lock   held (flock) by the one process training in the directory, while it does
    config.yaml      the options the run was started with
    data.json        the data files it read, per task and split (size, time, content hash), checked by --resume
    tasks/<task>.yml the task definitions it trained, resolved
    encoder/, heads/<task>/  its weights (safetensors) and head configs
    checkpoints/     resume points; metrics.jsonl, the training curve; run.log, its log lines
"""
from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import yaml

from mtbio.errors import MtbioError
from mtbio.fileio import make_dir, write_json, write_text, writing


BEST_DIR = "best"  # <run>/best/<task>/ (--select per-task): a one-task run directory of the task's own best weights


@dataclass(frozen=True)
class RunDir:
    """One run directory (it may not exist yet: a run about to be written)."""

    path: Path
    RESULTS: ClassVar[str] = "results.json"
    LOCK: ClassVar[str] = ".training.lock"

    def __init__(self, path: Path | str):
        object.__setattr__(self, "path", Path(path))

    @property
    def results_file(self) -> Path:
        return self.path / self.RESULTS

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def data_file(self) -> Path:
        return self.path / "data.json"

    @property
    def tasks_dir(self) -> Path:
        return self.path / "tasks"

    @property
    def encoder_dir(self) -> Path:
        return self.path / "encoder"

    @property
    def heads_dir(self) -> Path:
        return self.path / "heads"

    def model_dir_for(self, task: str) -> Path:
        """Where `task`'s weights are: `best/<task>/`, its own best evaluation in a `--select per-task` joint run,
        else the run itself."""
        own = self.path / BEST_DIR / task
        return own if (RunDir(own).encoder_dir / "config.json").is_file() else self.path

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def finished(self) -> bool:
        """Whether the run finished (its results.json is there)."""
        return self.results_file.is_file()

    @property
    def has_weights(self) -> bool:
        return self.encoder_dir.is_dir()

    def results(self) -> dict[str, Any]:
        """results.json; MtbioError naming the file when it is missing, unreadable or not a JSON object."""
        path = self.results_file
        try:
            results = json.loads(path.read_text())
        except FileNotFoundError:
            raise MtbioError(f"{path}: missing (not a finished run)") from None
        except (OSError, ValueError) as exc:
            raise MtbioError(f"{path}: unreadable ({exc})") from None
        if not isinstance(results, dict):
            raise MtbioError(f"{path}: unreadable (not a JSON object)")
        return results

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the directory for this process while it trains there (an advisory lock that the kernel drops
        when the process ends, however it ends); MtbioError naming the holder when another process has it.
        The lock file goes when the run ends, and a directory created here and left empty goes with it."""
        created = not self.path.exists()
        make_dir(self.path)
        handle = self._lock()
        try:
            yield
        finally:
            (self.path / self.LOCK).unlink(missing_ok=True)  # removed while still held: a newcomer makes a fresh one
            handle.close()
            if created and not any(self.path.iterdir()):
                self.path.rmdir()

    def _lock(self) -> IO[str]:
        """The lock file, opened and locked, naming this process."""
        lock = self.path / self.LOCK
        while True:
            with writing(lock):
                handle = open(lock, "a+", encoding="utf-8")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise MtbioError(f"{self.path}: {holder} is training in this directory; wait for it to finish or "
                                 "choose another --output") from None
            try:
                current = os.stat(lock).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if current:
                break
            handle.close()  # its last holder removed it between our open and our lock: open the new one
        handle.seek(0)
        handle.truncate()
        handle.write(f"mtbio process {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        return handle

    def read_text(self, name: str) -> str:
        """One of the run's files (`affinity_points.json`), by its path inside the run."""
        return (self.path / name).read_text(encoding="utf-8")

    def write_results(self, results: dict[str, Any]) -> Path:
        """Write `results` as results.json (indented JSON), which marks the run finished; returns its path."""
        return write_json(self.results_file, results)

    def config(self) -> dict[str, Any]:
        """config.yaml's options ({} for a run that has none)."""
        if not self.config_file.is_file():
            return {}
        try:
            config = yaml.safe_load(self.config_file.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise MtbioError(f"{self.config_file}: unreadable ({exc})") from None
        if not isinstance(config, dict):
            raise MtbioError(f"{self.config_file}: expected a mapping")
        return config

    def data_files(self) -> dict[str, Any]:
        """data.json's record of the files the run read ({} for a run written before runs kept one)."""
        try:
            record = json.loads(self.data_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise MtbioError(f"{self.data_file}: unreadable ({exc})") from None
        if not isinstance(record, dict):
            raise MtbioError(f"{self.data_file}: unreadable (not a JSON object)")
        return record

    def task_files(self) -> list[Path]:
        """The saved task definitions (tasks/<task>.yml); MtbioError for a directory that has none."""
        if not self.tasks_dir.is_dir():
            raise MtbioError(f"{self.path}: not an mtbio run directory (no tasks/)")
        return sorted(self.tasks_dir.glob("*.yml"))

    @property
    def stage(self) -> str:
        """The stage that wrote the run (`refine`, `single-task`, `finetune`, `merge`...), `unknown` unfinished."""
        return str(self.results().get("stage", "unknown")) if self.finished else "unknown"

    @classmethod
    def find(cls, path: Path | str, weights: bool = False) -> list["RunDir"]:
        """`path` if it is a run, else the runs one or two levels down (`<task>/`, `<task>/seed-<s>/`): finished
        runs (also those a study's cells.jsonl keeps, their folders gone: read them with `saved_cell`), or with
        `weights` runs that saved weights."""
        path = Path(path)

        def is_run(p: Path) -> bool:
            return RunDir(p).has_weights if weights else RunDir(p).finished

        if is_run(path) or not weights and saved_cell(path) is not None:
            return [cls(path)]
        found = [cls(p) for depth in ("*", "*/*") for p in sorted(path.glob(depth)) if p.is_dir() and is_run(p)]
        if not weights:
            kept = [cls(c.path) for c in packed_below(path)
                    if not c.path.exists() and len(c.path.relative_to(path).parts) <= 2]
            found = sorted(found + kept, key=lambda run: (len(run.path.relative_to(path).parts), run.path))
        if not found:
            what = "encoder/" if weights else "results.json"
            raise MtbioError(f"{path}: no {what} here or one or two levels down (not a finished run or folder of runs)")
        return found


@dataclass(frozen=True)
class StudyLayout:
    """What a kind of study leaves in its directory: the file where it writes what it found (`summary`) and the
    folders of its cells (`cells`, each `<folder>/<name>/seed-<s>/`). A study registers its layout beside the code
    that writes its summary (`register_study`); nothing here lists the kinds."""

    kind: str
    summary: str
    cells: tuple[str, ...] = ()

    def found_in(self, path: Path | str) -> bool:
        """Whether the directory holds this kind's summary."""
        return (Path(path) / self.summary).is_file()


STUDY_LAYOUTS: dict[str, StudyLayout] = {}


def register_study(kind: str, summary: str, cells: tuple[str, ...] = ()) -> StudyLayout:
    """Register a kind of study's layout; returns it (the module that writes the summary keeps it as a constant)."""
    layout = StudyLayout(kind, summary, cells)
    if STUDY_LAYOUTS.get(kind, layout) != layout:
        raise MtbioError(f"study kind '{kind}' is already registered with another layout")
    STUDY_LAYOUTS[kind] = layout
    return layout


@dataclass(frozen=True)
class SweepDir:
    """A sweep's directory (pairwise, stilt, affinity, select, transfer), the one owner of what every study shares:

        sweep.json        the options every cell was trained with (checked when the sweep resumes)
        cells.json        every cell any launcher was asked for (`mtbio sweep status`)
        cells.jsonl       every finished cell's results and small files, one a line (`pack_cells`); a cell whose
                          folder is gone is read from here (`saved_cell`)

    and, per kind of study, its registered `StudyLayout`: its cells (pairwise: baselines/<task>/seed-<s>/,
    pairs/<a>+<b>/seed-<s>/; STILT: transfer/<i>-to-<t>/seed-<s>/; transfer: targets/...) and its summary file
    (relations.json, stilt.json, affinity.json, select.json, transfer.json).
    """

    path: Path

    def __init__(self, path: Path | str):
        object.__setattr__(self, "path", Path(path))

    @property
    def protocol_file(self) -> Path:
        return self.path / "sweep.json"

    @property
    def cells_file(self) -> Path:
        return self.path / "cells.json"

    def summary_file(self, layout: StudyLayout) -> Path:
        """The file where a study of this layout writes what it found."""
        return self.path / layout.summary

    def cell_runs(self, folders: tuple[str, ...]) -> list[RunDir | PackedCell]:
        """The finished cells under `folders` (`<folder>/<name>/seed-<s>/`), in path order, from their directories
        or, once those are gone, from the cells.jsonl of the study holding them (`saved_runs`)."""
        found = [(folders.index(parts[0]), run) for run in saved_runs(self.path)
                 for parts in [run.path.relative_to(self.path).parts]
                 if len(parts) == 3 and parts[0] in folders and parts[2].startswith("seed-")]
        return [run for _, run in sorted(found, key=lambda pair: (pair[0], pair[1].path))]


# ---- a study's finished cells in one file ----------------------------------------------------------
PACKED_CELLS = "cells.jsonl"  # <study>/cells.jsonl: one JSON line per finished cell, standing in for its directory
_NOT_PACKED = ("encoder", "heads", "checkpoints", "run.log")  # weights, resume points and logs stay out


@dataclass(frozen=True)
class PackedCell:
    """A finished cell read from its study's cells.jsonl, its directory gone: what a report reads of a `RunDir`
    (`results()`, `config()`, the saved task definitions) from the files the line keeps."""

    path: Path  # where the cell's directory was
    result: dict[str, Any]
    files: dict[str, str]  # the cell's other small files by their path inside it: config.yaml, tasks/<t>.yml, ...

    finished: ClassVar[bool] = True

    def results(self) -> dict[str, Any]:
        """results.json's content (a copy, as `RunDir.results` reads a fresh one)."""
        return copy.deepcopy(self.result)

    def config(self) -> dict[str, Any]:
        """config.yaml's options ({} for a cell that kept none)."""
        config = yaml.safe_load(self.files.get("config.yaml", "")) or {}
        if not isinstance(config, dict):
            raise MtbioError(f"{self.path}/config.yaml (in {PACKED_CELLS}): expected a mapping")
        return config

    def read_text(self, name: str) -> str:
        """One of the cell's files (`affinity_points.json`), as `RunDir.read_text` reads it from a directory
        (FileNotFoundError: the cell had no such file)."""
        if name not in self.files:
            raise FileNotFoundError(f"{self.path / name}: not kept in {PACKED_CELLS}")
        return self.files[name]

    def task_texts(self) -> dict[str, str]:
        """The saved task definitions (tasks/<task>.yml) as written, by task name."""
        return {Path(name).stem: text for name, text in sorted(self.files.items())
                if name.startswith("tasks/") and name.endswith(".yml")}


_PACKED_CACHE: dict[Path, tuple[tuple[int, int], dict[str, tuple[dict, dict]]]] = {}


def packed_cells(study: Path | str) -> dict[str, PackedCell]:
    """The cells a study's cells.jsonl keeps, by their directory relative to the study ({} without the file)."""
    path = Path(study) / PACKED_CELLS
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    cached = _PACKED_CACHE.get(path.resolve())
    if cached is None or cached[0] != (stat.st_mtime_ns, stat.st_size):
        entries = {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                entry = json.loads(line)
                entries[str(entry["cell"])] = (dict(entry["results"]), dict(entry["files"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise MtbioError(f"{path}:{number}: unreadable cell ({exc})") from None
        cached = _PACKED_CACHE[path.resolve()] = ((stat.st_mtime_ns, stat.st_size), entries)
    return {name: PackedCell(Path(study) / name, results, files) for name, (results, files) in cached[1].items()}


def saved_cell(run_dir: Path | str) -> RunDir | PackedCell | None:
    """A finished cell, wherever it is kept: its directory when that holds results.json; else, when the directory
    is gone, its line in the cells.jsonl of the nearest study above it that keeps it; else None."""
    run = RunDir(run_dir)
    if run.finished:
        return run
    if run.path.exists():
        return None  # a directory is the truth about its cell: one still training is not finished
    for study in _studies_above(run.path):
        found = packed_cells(study).get(os.path.relpath(run.path, study))
        if found is not None:
            return found
    return None


def _studies_above(path: Path) -> list[Path]:
    """The directories whose cells.jsonl may keep a cell at or below `path`: itself and a few levels up."""
    return [path, *list(path.parents)[:6]]


def packed_below(path: Path | str) -> list[PackedCell]:
    """The cells kept in the cells.jsonl files of `path` and the studies above it whose directories were below
    `path`, nearest file first (one cell once)."""
    path, found = Path(path), {}
    for study in _studies_above(path):
        for cell in packed_cells(study).values():
            if cell.path.is_relative_to(path) and cell.path != path:
                found.setdefault(Path(os.path.normpath(cell.path)), cell)
    return list(found.values())


def saved_runs(path: Path | str) -> list[RunDir | PackedCell]:
    """Every finished run below `path`, in path order: from its directory (with results.json), or, where the
    directory is gone, from the cells.jsonl of the study that keeps it (this directory's or one above)."""
    path = Path(path)
    found: dict[Path, RunDir | PackedCell] = {p: RunDir(p) for p in finished_runs(path)} if path.is_dir() else {}
    for cell in packed_below(path):
        if not cell.path.exists():
            found.setdefault(cell.path, cell)
    return [found[name] for name in sorted(found)]


def _cell_files(run_dir: Path) -> dict[str, str]:
    """A finished cell's small text files by their path inside it (weights, checkpoints and its log left out)."""
    files = {}
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        name = path.relative_to(run_dir).as_posix()
        if name.split("/")[0] in _NOT_PACKED or name == RunDir.RESULTS or any(part.startswith(".") for part in
                                                                                 name.split("/")):
            continue
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text (a weight file kept by --keep-weights): not a record of the cell
    return files


def finished_runs(study: Path | str) -> list[Path]:
    """Every finished run directory below `study` (one with results.json), not looking inside a run."""
    found, study = [], Path(study)
    for path in sorted(p for p in study.iterdir() if p.is_dir()):
        found += [path] if RunDir(path).finished else finished_runs(path)
    return found


def pack_cells(study: Path | str, run_dirs: list[Path] | None = None) -> Path:
    """Write the study's cells.jsonl: the cells it already keeps whose directories are gone, and every finished cell
    of `run_dirs` (default: every finished run below the study) and of the file whose directory is there, read
    again from that directory (a kept cell whose directory is back, training again, is dropped). Returns its path."""
    study = Path(study)
    kept = {name: {"cell": name, "config_sha256": _sha256(cell.files.get("config.yaml")), "results": cell.result,
                   "files": cell.files}
            for name, cell in packed_cells(study).items() if not (study / name).exists()}
    runs = finished_runs(study) if run_dirs is None else list(run_dirs)
    runs += [study / name for name in packed_cells(study) if name not in kept]
    for run_dir in runs:
        if RunDir(run_dir).finished and Path(run_dir).resolve().is_relative_to(study.resolve()):
            name, files = os.path.relpath(run_dir, study), _cell_files(Path(run_dir))
            kept[name] = {"cell": name, "config_sha256": _sha256(files.get("config.yaml")),
                          "results": RunDir(run_dir).results(), "files": files}
    lines = [json.dumps(kept[name], ensure_ascii=False) for name in sorted(kept)]  # results in their own order
    return write_text(study / PACKED_CELLS, "".join(f"{line}\n" for line in lines))


def remove_packed(study: Path | str) -> list[Path]:
    """Delete the directories of the cells the study's cells.jsonl keeps, except those holding what the file does not:
    weights, resume points, or a file it could not keep (a picture: curves.png); returns the directories deleted."""
    removed = []
    for cell in packed_cells(study).values():
        kept_apart = any(cell.path.glob("encoder/*.safetensors")) or any(cell.path.glob("heads/*/*.safetensors")) \
            or any(cell.path.glob("checkpoints/*")) or any(
                name not in cell.files and name != RunDir.RESULTS and name.split("/")[0] not in _NOT_PACKED
                for name in (p.relative_to(cell.path).as_posix() for p in cell.path.rglob("*") if p.is_file()))
        if cell.path.is_dir() and RunDir(cell.path).finished and not kept_apart:
            shutil.rmtree(cell.path)
            removed.append(cell.path)
            for parent in cell.path.parents:  # a folder left empty (pairs/<a>+<b>/) goes too
                if parent == Path(study) or not parent.is_dir() or any(parent.iterdir()):
                    break
                parent.rmdir()
    return removed


def _sha256(text: str | None) -> str | None:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None
