"""Where each public data file comes from: the packaged manifest `sources.json` (repository, commit, path, size,
sha256 per file, checked against the repositories: docs/task_definitions.md) and the files a task needs from it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

from mtbio.errors import MtbioError
from mtbio.tasks.schema import TaskDef

MANIFEST = Path(__file__).resolve().parent / "sources.json"


@dataclass(frozen=True)
class Archive:
    """A file of the repository holding several data files (a zip), fetched whole and verified."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SourceFile:
    """One data file: where it goes under the data directory and where its bytes are."""

    dest: str        # under the data directory, e.g. "ChemProt/train.txt"
    repo: str        # "owner/name" on GitHub
    commit: str
    path: str        # in the repository, or in `archive` when there is one
    size: int
    sha256: str
    archive: Archive | None = None

    @property
    def origin(self) -> str:
        """'allenai/scibert @ 06793f7'."""
        return f"{self.repo} @ {self.commit[:7]}"


@dataclass(frozen=True)
class ManualFile:
    """A file a task reads that is not downloadable as is; `note` says what to do (DIR: the data directory)."""

    dest: str
    note: str

    def instructions(self, data_dir: Path) -> str:
        """The note with the data directory filled in."""
        return self.note.replace("DIR", str(data_dir))


@dataclass(frozen=True)
class TaskSources:
    """What `mtbio data get` can fetch for a task, and what needs a manual step."""

    files: list[SourceFile]
    manual: list[ManualFile]
    folders: list[str] = field(default_factory=list)  # declared folders (Chia's): filled beside, renamed when whole

    @property
    def origins(self) -> list[str]:
        """The repositories and commits the files come from, each once."""
        return list(dict.fromkeys(f.origin for f in self.files))


@lru_cache(maxsize=1)
def _manifest() -> list[TaskSources]:
    """Each data folder's files and manual steps."""
    try:
        datasets = json.loads(MANIFEST.read_text())["datasets"]
    except (OSError, ValueError, KeyError) as exc:
        raise MtbioError(f"{MANIFEST}: cannot read the data sources manifest: {exc}") from exc
    folders = []
    for entry in datasets.values():
        archive = Archive(**entry["archive"]) if "archive" in entry else None
        prefixes = sorted(entry["paths"].items(), key=lambda kv: -len(kv[0]))  # the longest folder first
        files = []
        for dest, (size, sha256) in entry["files"].items():
            folder, source = next((f, s) for f, s in prefixes if dest.startswith(f))
            files.append(SourceFile(dest, entry["repo"], entry["commit"], source + dest[len(folder):], size, sha256,
                                    archive))
        folders.append(TaskSources(files, [ManualFile(dest, note) for dest, note in entry.get("manual", {}).items()]))
    return folders


def _covers(declared: str, dest: str) -> bool:
    """Whether `dest` is the declared file or lies in the declared folder."""
    return dest == declared or dest.startswith(declared + "/")


def task_sources(task: TaskDef) -> TaskSources:
    """The files (and manual steps) of every data folder holding a file or folder the task's `files` declare (a
    folder whole: NLI4CT's trial reports sit beside the split files that name them)."""
    declared = [PurePosixPath(name).as_posix() for value in task.files.values()
                for name in ([value] if isinstance(value, str) else value)]
    needed = [folder for folder in _manifest()
              if any(_covers(d, entry.dest) for d in declared for entry in [*folder.files, *folder.manual])]
    files = [f for folder in needed for f in folder.files]
    return TaskSources(files, [m for folder in needed for m in folder.manual],
                       [d for d in declared if any(f.dest.startswith(d + "/") for f in files)])
