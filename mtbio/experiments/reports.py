"""`mtbio report`: what each argument is, and how that kind of result is rebuilt and shown.

A report kind registers how it recognises its directories (`detect`) and how it shows them (`render`, which
may first rebuild the kind's files from finished cells). `render_report` takes the first kind, in
registration order, that recognises the arguments; the runs table is the fallback, tried last, and takes
any run or folder of runs. A new kind of study (leave-one-out, say) is one registration here beside its stage.
"""
from __future__ import annotations

import json

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mtbio.errors import MtbioError
from mtbio.registry import Registry
from mtbio.run_dir import StudyLayout, SweepDir, packed_cells

if TYPE_CHECKING:
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


def _is_affinity(path: Path) -> bool:
    from mtbio.reporting.affinity import AFFINITY  # each study's layout is registered where its summary is written

    return AFFINITY.found_in(path)


@register_report("affinity", lambda paths, options: any(_is_affinity(p) for p in paths))
def _affinity(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.reporting.affinity import report_affinity, report_comparison

    affinities = [p for p in paths if _is_affinity(p)]
    others = [p for p in paths if p not in affinities]
    if len(affinities) > 1 or len(others) > 1 or options.table_options or options.output:
        raise MtbioError("an affinity directory is reported alone (mtbio report AFFINITY_DIR) or against a pairwise "
                         "sweep (mtbio report PAIRWISE_DIR AFFINITY_DIR), without other options")
    if not others:
        return [report_affinity(affinities[0])]
    return [report_comparison(others[0], affinities[0]),
            f"\nwritten: {SweepDir(affinities[0]).path / 'comparison.json'} and comparison.png"]


def _is_pairwise_sweep(path: Path) -> bool:
    """A pairwise sweep's directory: its protocol, and its pairs' folder or their lines in its cells.jsonl."""
    return SweepDir(path).protocol_file.is_file() and (
        (path / "pairs").is_dir() or any(name.startswith("pairs/") for name in packed_cells(path)))


def _graphs_in(path: Path) -> bool:
    """Whether the directory holds a pairwise graph or a STILT matrix."""
    from mtbio.reporting.relations import PAIRWISE, STILT

    return PAIRWISE.found_in(path) or STILT.found_in(path)


def _is_sweep(path: Path) -> bool:
    return _is_pairwise_sweep(path) or _graphs_in(path)


@register_report("sweep", lambda paths, options: any(_is_sweep(p) for p in paths))
def _sweep(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.experiments.pairwise import rebuild_relations
    from mtbio.reporting.relations import PAIRWISE, STILT, format_study, write_relations, write_stilt

    sweeps = [p for p in paths if _is_sweep(p)]
    if len(sweeps) != len(paths) or options.table_options or (options.output and len(paths) > 1):
        raise MtbioError("a sweep directory is reported alone: mtbio report SWEEP_DIR (no other runs, --label, "
                         "--csv, --trivial or --compare-to; --output DIR takes one sweep)")
    lines, texts = [], []
    for path in paths:
        target = options.study_output(path)
        if _is_pairwise_sweep(path) and target == path:  # rebuilt from its finished cells, whatever still runs
            lines += [f"written: {w}" for w in rebuild_relations(path, options.decision_rule(_saved(path, PAIRWISE)))]
            texts.append(format_study(json.loads(SweepDir(path).summary_file(PAIRWISE).read_text())))
        elif PAIRWISE.found_in(path):  # judged again from the saved per-seed scores, written elsewhere or not at all
            relations = _rejudged(path, PAIRWISE, options)
            lines += [f"written: {w}" for w in write_relations(target, relations)] if target else []
            texts.append(format_study(relations))
        if STILT.found_in(path):
            stilt = _rejudged(path, STILT, options)
            lines += [f"written: {w}" for w in write_stilt(target, stilt)] if target else []
            texts.append(format_study(stilt))
    return lines + ["\n\n".join(texts)]


def _is_transfer(path: Path) -> bool:
    from mtbio.reporting.transfer import TRANSFER

    return TRANSFER.found_in(path)


@register_report("transfer", lambda paths, options: any(_is_transfer(p) for p in paths))
def _transfer(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.reporting.transfer import TRANSFER, format_transfer, write_transfer

    if len(paths) > 1 or options.table_options:
        raise MtbioError("a transfer directory is reported alone: mtbio report TRANSFER_DIR")
    table = _rejudged(paths[0], TRANSFER, options)
    target = options.study_output(paths[0])
    return [format_transfer(table), *(f"written: {p}" for p in (write_transfer(target, table) if target else []))]


def _saved(path: Path, layout: StudyLayout) -> dict | None:
    file = SweepDir(path).summary_file(layout)
    return json.loads(file.read_text()) if file.is_file() else None


def _rejudged(path: Path, layout: StudyLayout, options: ReportOptions) -> dict:
    """A study's summary file judged again under the rule `options` names (no training)."""
    from mtbio.reporting.rejudge import rejudge

    saved = _saved(path, layout)
    assert saved is not None
    return rejudge(saved, options.decision_rule(saved))


def _is_select(path: Path) -> bool:
    from mtbio.reporting.selection import SELECT

    return SELECT.found_in(path)


@register_report("select", lambda paths, options: any(_is_select(p) for p in paths))
def _select(paths: list[Path], options: ReportOptions) -> list[str]:
    from mtbio.fileio import write_json, write_text
    from mtbio.reporting.selection import SELECT, selection_markdown

    if len(paths) > 1 or options.table_options:
        raise MtbioError("a select directory is reported alone: mtbio report SELECT_DIR")
    result = _rejudged(paths[0], SELECT, options)
    markdown = selection_markdown(result)
    target = options.study_output(paths[0])
    if target is None:
        return [markdown]
    write_json(SweepDir(target).summary_file(SELECT), result)
    write_text(target / "select.md", markdown)
    return [markdown, f"written: {SweepDir(target).summary_file(SELECT)} and select.md"]


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
