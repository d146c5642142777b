"""The shipped studies, each registered once (`mtbio.reporting.studies`): pairwise, STILT, transfer, select and
affinity. Imported on first use of the study registry, so it imports no training code (a stage is imported when
its study runs or rebuilds)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.reporting.affinity import AFFINITY
from mtbio.reporting.rejudge import rejudge_pairwise, rejudge_select, rejudge_stilt, rejudge_transfer
from mtbio.reporting.relations import PAIRWISE, STILT, format_study, write_relations, write_stilt
from mtbio.reporting.selection import SELECT, selection_markdown, write_selection
from mtbio.reporting.studies import Study, register_study_kind
from mtbio.reporting.transfer import TRANSFER, format_transfer, write_transfer
from mtbio.reporting.verdicts import Rule


def _from(cell: Any) -> str:
    """The start of a transfer cell: a cell of the sweep (<name>/seed-<s>), or a run given by its directory."""
    if cell.from_cell is None:
        return "?"
    return (cell.from_cell.parent if cell.from_cell.name.startswith("seed-") else cell.from_cell).name


def _rebuild_pairwise(path: Path, rule: Rule) -> list[Path]:
    from mtbio.experiments.pairwise import rebuild_relations

    return rebuild_relations(path, rule)


def _report_affinity(paths: list[Path], options: Any) -> list[str]:
    """An affinity directory alone (its predicted matrices), or against a pairwise sweep (prediction vs measurement)."""
    from mtbio.reporting.affinity import report_affinity, report_comparison

    affinities = [p for p in paths if AFFINITY.found_in(p)]
    others = [p for p in paths if p not in affinities]
    if len(affinities) > 1 or len(others) > 1 or options.table_options or options.output:
        raise MtbioError("an affinity directory is reported alone (mtbio report AFFINITY_DIR) or against a pairwise "
                         "sweep (mtbio report PAIRWISE_DIR AFFINITY_DIR), without other options")
    if not others:
        return [report_affinity(affinities[0])]
    return [report_comparison(others[0], affinities[0]),
            f"\nwritten: {affinities[0] / 'comparison.json'} and comparison.png"]


register_study_kind(Study("affinity", AFFINITY, report=_report_affinity,
                          cells={"joint": lambda c: f"joint run of {len(c.tasks)} tasks with affinity measurement"}))
register_study_kind(Study("pairwise", PAIRWISE, format=format_study, write=write_relations, rejudge=rejudge_pairwise,
                          rebuild=_rebuild_pairwise,
                          cells={"baseline": lambda c: f"baseline {c.tasks[0]}",
                                 "pair": lambda c: f"pair {' + '.join(c.tasks)}"}))
register_study_kind(Study("stilt", STILT, format=format_study, write=write_stilt, rejudge=rejudge_stilt,
                          cells={"transfer": lambda c: f"transfer {_from(c)} → {c.tasks[0]}"}))
register_study_kind(Study("transfer", TRANSFER, format=format_transfer, write=write_transfer, rejudge=rejudge_transfer,
                          cells={"refined": lambda c: f"refine on {' + '.join(c.tasks)}"}))
register_study_kind(Study("select", SELECT, format=selection_markdown, write=write_selection, rejudge=rejudge_select))
