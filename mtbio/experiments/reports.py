"""`mtbio report`: what each argument is, and how that kind of result is rebuilt and shown.

A report kind registers how it recognises its directories (`detect`) and how it shows them (`render`, which
may first rebuild the kind's files from finished cells). `render_report` takes the first kind, in
registration order, that recognises the arguments; the runs table is the fallback, tried last, and takes
any run or folder of runs. A study's directory is shown by its registration (`mtbio.reporting.studies`), so a new
kind of study (leave-one-out, say) registers nothing here.
"""
from __future__ import annotations

import json

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mtbio.errors import MtbioError
from mtbio.registry import Registry
from mtbio.run_dir import SweepDir

if TYPE_CHECKING:
    from mtbio.reporting.studies import Study
    from mtbio.reporting.verdicts import Rule


@dataclass(frozen=True)
class ReportOptions:
    """The table options of `mtbio report` (a sweep or affinity directory takes none of them)."""

    split: str = "dev"
    labels: tuple[str, ...] = ()
    output: str | None = None
    csv_path: str | None = None
    trivial: bool = False
    data_dir: str | None = None
    compare_to: str | None = None
    compare_each: bool = False
    metric_overrides: tuple[str, ...] = ()
    curves: bool = False
    correction: str = "holm"
    rule: str | None = None  # None: a study's own rule (its file's), v2 for a runs table
    looks: str | None = None  # FIRST:LAST, the adaptive looks of a study whose file does not record them
    in_place: bool = False  # write a study judged under another rule over its own files
    primary: str | None = None  # the comparison judged alone at alpha
    power: bool = False  # a study's detectable effects instead of its verdicts
    sd: float | None = None  # --power: the per-seed sd of Δ (None: measured on the study's comparisons)
    effect: float | None = None  # --power: the true Δ whose seeds needed are stated

    def decision_rule(self, saved: dict | None = None) -> "Rule":
        """The rule to judge with: --rule (else the one `saved`, a study's summary file, was judged by), --correction,
        --primary, the looks from --looks or else from `saved`."""
        from dataclasses import replace

        from mtbio.reporting.rejudge import recorded_rule
        from mtbio.reporting.verdicts import Rule

        base = recorded_rule(saved) if saved else Rule()
        looks = base.looks
        if self.looks:
            first, _, last = self.looks.partition(":")
            if not (first.isdigit() and last.isdigit() and 2 <= int(first) <= int(last)):
                raise MtbioError(f"--looks {self.looks}: expected FIRST:LAST seeds, e.g. 3:8")
            looks = (int(first), int(last))
        return replace(base, version=self.rule or base.version, correction=self.correction, looks=looks,
                       primary=self.primary or base.primary)

    @property
    def rejudging(self) -> bool:
        """Whether the options ask for another rule than a study's own (--rule, --looks, --correction, --primary)."""
        return bool(self.rule or self.looks or self.primary) or self.correction != "holm"

    def study_output(self, path: Path) -> Path | None:
        """Where a study's files judged under these options go: the study itself when its own rule is asked (or
        with --in-place), else the --output folder, else nowhere (printed only)."""
        if self.in_place or not self.rejudging:
            return path
        return Path(self.output) if self.output else None

    @property
    def table_options(self) -> bool:
        """Whether any option of the runs table was given."""
        return bool(self.labels or self.csv_path or self.trivial or self.compare_to or self.compare_each
                    or self.metric_overrides)


@dataclass(frozen=True)
class ReportKind:
    name: str
    detect: Callable[[list[Path], ReportOptions], bool]
    render: Callable[[list[Path], ReportOptions], list[str]]  # the lines to print
    fallback: bool = False  # tried after every other kind


REPORT_KINDS: Registry[ReportKind] = Registry("report kind")


def register_report(name: str, detect: Callable[[list[Path], ReportOptions], bool], fallback: bool = False) -> Callable:
    """Register `render(paths, options) -> lines` as the report of directories `detect` recognises."""
    def decorator(render: Callable[[list[Path], ReportOptions], list[str]]) -> Callable:
        REPORT_KINDS.register(name)(ReportKind(name, detect, render, fallback))
        return render

    return decorator


def render_report(paths: list[Path], options: ReportOptions) -> list[str]:
    """The lines `mtbio report` prints for `paths` (files it writes are named among them)."""
    for kind in sorted(REPORT_KINDS.in_order(), key=lambda k: k.fallback):
        if kind.detect(paths, options):
            return kind.render(paths, options)
    raise MtbioError("nothing to report")  # pragma: no cover (the runs table takes anything)


@register_report("curves", lambda paths, options: options.curves)
def _curves(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.reporting.tables import write_curves

    return [f"written: {write_curves(path)}" for path in paths]


def _comparisons(data: object) -> list[dict]:
    """Every saved comparison (a dict with per-seed Δ) anywhere in a study's summary file."""
    if isinstance(data, dict):
        if "per_seed" in data and "delta" in data and "n_seeds" in data:
            return [data]
        return [c for value in data.values() for c in _comparisons(value)]
    return [c for value in data for c in _comparisons(value)] if isinstance(data, list) else []


@register_report("power", lambda paths, options: options.power)
def _power(paths: list[Path], options: ReportOptions) -> list[str]:
    """`mtbio report --power DIR`: what the study's design can decide, from --sd or its measured per-seed sd of Δ."""
    import statistics

    from mtbio.reporting.rule_power import power_lines

    if len(paths) != 1 or not (paths[0] / "sweep.json").is_file() and not list(paths[0].glob("*.json")):
        raise MtbioError("--power takes one study directory (pairwise, stilt, transfer, select)")
    files = [f for f in sorted(paths[0].glob("*.json")) if f.name not in ("sweep.json", "cells.json", "declared.json")]
    cells = [c for f in files for c in _comparisons(json.loads(f.read_text())) if c.get("sd") is not None]
    if not cells:
        raise MtbioError(f"{paths[0]}: no saved comparisons with per-seed differences (not a finished study?)")
    n = int(statistics.median(c["n_seeds"] for c in cells))
    measured = statistics.median(c["sd"] for c in cells)
    sd, basis = (options.sd, "given") if options.sd else (measured, f"the median over its {len(cells)} comparisons")
    min_delta = cells[0].get("min_delta") or 0.01
    return power_lines(sd, n, len(cells), min_delta, effect=options.effect, basis=basis)


def _studies_in(path: Path) -> list["Study"]:
    """The registered studies whose directory `path` is (a folder may hold a pairwise graph and a STILT matrix)."""
    from mtbio.reporting.studies import studies

    return [study for study in studies() if study.found_in(path)]


@register_report("study", lambda paths, options: any(_studies_in(p) for p in paths))
def _study(paths: list[Path], options: ReportOptions) -> list[str]:
    """A study's directory: its summary judged again (under --rule, or rebuilt from its cells when it is written
    over the study's own files), the files written and its text; a study with a report of its own gives that."""
    found = [(path, study) for path in paths for study in _studies_in(path)]
    own = next((study for _, study in found if study.report is not None), None)
    if own is not None and own.report is not None:
        return own.report(paths, options)
    if len({path for path, _ in found}) != len(paths) or options.table_options or (options.output and len(paths) > 1):
        raise MtbioError(f"a {found[0][1].name} directory is reported alone: mtbio report DIR (no other runs, --label, "
                         "--csv, --trivial or --compare-to; --output DIR takes one study)")
    lines, texts = [], []
    for path, study in found:
        assert study.format is not None and study.write is not None
        target = options.study_output(path)
        if study.rebuild is not None and study.rebuilds(path) and target == path:  # from its finished cells
            lines += [f"written: {w}" for w in study.rebuild(path, options.decision_rule(study_summary(path, study)))]
            summary = study_summary(path, study)
        elif study.layout.found_in(path):  # judged again from the saved per-seed scores, written there or elsewhere
            summary = _rejudged(path, study, options)
            lines += [f"written: {w}" for w in study.write(target, summary)] if target else []
        else:
            continue
        assert summary is not None
        texts.append(study.format(summary))
    return lines + ["\n\n".join(texts)]


def study_summary(path: Path, study: "Study") -> dict | None:
    """The summary file a study left in `path` (None: not written yet): what report and re-judge read of it."""
    file = SweepDir(path).summary_file(study.layout)
    return json.loads(file.read_text()) if file.is_file() else None


def _rejudged(path: Path, study: "Study", options: ReportOptions) -> dict:
    """A study's summary file judged again under the rule `options` names (no training)."""
    from mtbio.reporting.rejudge import rejudge

    saved = study_summary(path, study)
    assert saved is not None
    return rejudge(saved, options.decision_rule(saved))


@register_report("runs", lambda paths, options: True, fallback=True)
def _runs(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.fileio import write_json, write_text
    from mtbio.reporting.tables import build_report, to_markdown, trivial_column, write_csv

    metrics: dict[str, str] = {}
    for pair in options.metric_overrides:
        task, _, metric = pair.partition("=")
        if not task or not metric:
            raise MtbioError(f"--metric {pair!r}: expected TASK=METRIC, e.g. ddi=macro_f1")
        metrics[task] = metric
    trivial_scores = None
    if options.trivial:
        from mtbio.tasks.loading import resolve_data_dir

        trivial_scores = trivial_column(paths, options.split, resolve_data_dir(options.data_dir), metrics)
    table = build_report(paths, options.split, options.labels, trivial=trivial_scores, compare_to=options.compare_to,
                         rule=options.decision_rule(), metrics=metrics, compare_each=options.compare_each)
    markdown = to_markdown(table)
    lines = [markdown]
    if options.output:
        write_text(options.output, markdown)
        lines.append(f"written: {options.output}")
    if not (options.csv_path or options.output):
        return lines
    target = Path(options.csv_path) if options.csv_path else Path(str(options.output)).with_suffix(".csv")
    write_csv(table, target)
    write_json(target.with_suffix(".json"), table)
    return lines + [f"written: {target} and {target.with_suffix('.json').name}"]
