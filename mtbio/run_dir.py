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

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import yaml

from mtbio.errors import MtbioError
from mtbio.fileio import make_dir, write_json, writing


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
        runs, or with `weights` runs that saved weights."""
        path = Path(path)

        def is_run(p: Path) -> bool:
            return RunDir(p).has_weights if weights else RunDir(p).finished

        if is_run(path):
            return [cls(path)]
        found = [cls(p) for depth in ("*", "*/*") for p in sorted(path.glob(depth)) if p.is_dir() and is_run(p)]
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

    def cell_runs(self, folders: tuple[str, ...]) -> list[RunDir]:
        """The finished cells under `folders` (`<folder>/<name>/seed-<s>/` with results.json), in path order."""
        return [RunDir(p.parent) for folder in folders for p in sorted(self.path.glob(f"{folder}/*/seed-*/{RunDir.RESULTS}"))]
