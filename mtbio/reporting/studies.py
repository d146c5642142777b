"""Each kind of study as one registered unit: its command, its directory, its cells, its report and its re-judge.

    LAYOUT = register_study("leave-one-out", "leave_one_out.json", ("runs",))
    register_study_kind(Study("leave-one-out", LAYOUT, format=..., write=..., rejudge=..., cells={...}, run=...))

`mtbio report DIR` shows a directory that a registered study finds its summary in (re-judged with `--rule`), a
sweep describes each cell by the study that declares the cell's kind, and a study with a `run` is the command
`mtbio <name>` (a plugin's too). The shipped studies register in `mtbio.experiments.studies`, imported by name on
first use, as the shipped task kinds are.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from mtbio.registry import Registry
from mtbio.reporting.verdicts import Rule
from mtbio.run_dir import StudyLayout

SHIPPED_STUDIES = "mtbio.experiments.studies"

Document = dict[str, Any]


@dataclass(frozen=True)
class Study:
    """One kind of study. `format` is the text `mtbio report` prints for its summary file and `write` writes that
    file (and its pictures) to a folder, returning the paths; `rejudge` judges the summary's comparisons again under
    a rule, in place (None: it has none); `rebuild` writes the summary again from the finished cells, returning the
    paths (when a report writes over the study's own files); `report` replaces all of that with a report of its own
    (`render(paths, options)` -> lines). `cells` maps each kind of cell the study introduces to what a sweep says of
    one. `run(config, echo)` -> (directory, summary or None) makes it a command, taking the `StudyConfig` options of
    the groups in `options`; `show(directory, summary)` is what the command prints after (default: `format`)."""

    name: str
    layout: StudyLayout
    format: Callable[[Document], str] | None = None
    write: Callable[[Path, Document], list[Path]] | None = None
    rejudge: Callable[[Document, Rule], None] | None = None
    rebuild: Callable[[Path, Rule], list[Path]] | None = None
    report: Callable[[list[Path], Any], list[str]] | None = None
    cells: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)
    folder: str | None = None  # runs/<folder>/<label> without --output (None: its name)
    run: Callable[..., tuple[Path, Document | None]] | None = None
    options: tuple[str, ...] = ()
    help: str = ""
    show: Callable[[Path, Document], str] | None = None

    def found_in(self, path: Path) -> bool:
        """Whether `path` holds this study: its summary file, or (a study rebuilt from its cells) its protocol and
        its own cell folder."""
        return self.layout.found_in(path) or self.rebuilds(path)

    def rebuilds(self, path: Path) -> bool:
        """Whether the study's summary can be written again from the cells in `path` (its protocol, its last cell
        folder, or its lines in the study's cells.jsonl)."""
        from mtbio.run_dir import packed_cells

        if self.rebuild is None or not self.layout.cells or not (path / "sweep.json").is_file():
            return False
        folder = self.layout.cells[-1]
        return (path / folder).is_dir() or any(name.startswith(f"{folder}/") for name in packed_cells(path))

    def sweep_dir(self, config: Any, label: str, folder: str | None = None) -> Path:
        """`--output`, else runs/<folder>/<label> (stable, so a rerun resumes)."""
        return Path(config.output) if config.output else Path("runs") / (folder or self.folder or self.name) / label


STUDIES: Registry[Study] = Registry("study")


def register_study_kind(study: Study) -> Study:
    """Register one kind of study (its name is its command and its summary's `kind`); returns it."""
    return STUDIES.register(study.name)(study)


def studies() -> list[Study]:
    """Every registered study, the shipped ones first, in registration order."""
    importlib.import_module(SHIPPED_STUDIES)
    return STUDIES.in_order()


def study(name: str) -> Study:
    """The study registered as `name` (MtbioError naming the known ones)."""
    importlib.import_module(SHIPPED_STUDIES)
    return STUDIES.get(name)


def task_label(config: Any, tasks: list[Any]) -> str:
    """A study's folder name for its tasks: the domain when only `--domain` named them, else their names."""
    return config.domain if config.domain and not config.tasks else "+".join(t.name for t in tasks)


def cell_description(cell: Any) -> str:
    """What a sweep says of a cell (`baseline chemprot`), by the study that declares the cell's kind."""
    for found in studies():
        if cell.kind in found.cells:
            return found.cells[cell.kind](cell)
    return str(cell.kind)
