"""The shipped studies, each registered once (`mtbio.reporting.studies`): pairwise, STILT, transfer, select and
affinity. Imported on first use of the study registry, so it imports no training code (a stage is imported when
its study runs or rebuilds)."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.reporting.affinity import AFFINITY
from mtbio.reporting.rejudge import rejudge_pairwise, rejudge_select, rejudge_stilt, rejudge_transfer
from mtbio.reporting.relations import PAIRWISE, STILT, format_study, report_relations, write_relations, write_stilt
from mtbio.reporting.selection import SELECT, selection_markdown, write_selection
from mtbio.reporting.studies import Document, Study, register_study_kind
from mtbio.reporting.transfer import TRANSFER, format_transfer, write_transfer
from mtbio.reporting.verdicts import Rule


def _from(cell: Any) -> str:
    """The start of a transfer cell: a cell of the sweep (<name>/seed-<s>), or a run given by its directory."""
    if cell.from_cell is None:
        return "?"
    return (cell.from_cell.parent if cell.from_cell.name.startswith("seed-") else cell.from_cell).name


def _stage(module: str, name: str) -> Callable[..., tuple[Path, Document | None]]:
    """A study's stage, `module.name(config, echo)`, imported when the study runs."""
    def run(config: Any, echo: Callable[[str], None] = print) -> tuple[Path, Document | None]:
        return getattr(importlib.import_module(module), name)(config, echo=echo)

    return run


def _relation_tables(directory: Path, result: Document) -> str:
    return report_relations(directory, only=result["kind"])


def _show_affinity(directory: Path, result: Document) -> str:
    from mtbio.reporting.affinity import report_affinity

    return report_affinity(directory)


SWEEP = ("seeds", "sweep", "training")  # the option groups every sweep study takes


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


register_study_kind(Study(
    "affinity", AFFINITY, report=_report_affinity,
    cells={"joint": lambda c: f"joint run of {len(c.tasks)} tasks with affinity measurement"},
    run=_stage("mtbio.experiments.affinity", "affinity"), options=("affinity", "seeds", "training"),
    show=_show_affinity,
    help="Predict which task helps which with a transfer predictor (--predictor): lookahead affinity or gradient "
         "cosine from one joint run per seed, or size_ratio, text_similarity, fisher without one."))
register_study_kind(Study(
    "pairwise", PAIRWISE, format=format_study, write=write_relations, rejudge=rejudge_pairwise,
    rebuild=_rebuild_pairwise,
    cells={"baseline": lambda c: f"baseline {c.tasks[0]}", "pair": lambda c: f"pair {' + '.join(c.tasks)}"},
    run=_stage("mtbio.experiments.pairwise", "pairwise"), options=("prune", *SWEEP), show=_relation_tables,
    help="Pairwise MTL: single-task baselines and every two-task run; which task helps which."))
register_study_kind(Study(
    "stilt", STILT, format=format_study, write=write_stilt, rejudge=rejudge_stilt,
    cells={"transfer": lambda c: f"transfer {_from(c)} → {c.tasks[0]}"},
    run=_stage("mtbio.experiments.stilt", "stilt"), options=("stilt", *SWEEP), show=_relation_tables,
    help="STILT: train on an intermediate task, then on the target; compare with the target's baseline."))
register_study_kind(Study(
    "transfer", TRANSFER, format=format_transfer, write=write_transfer, rejudge=rejudge_transfer,
    cells={"refined": lambda c: f"refine on {' + '.join(c.tasks)}"},
    run=_stage("mtbio.experiments.transfer", "transfer"), options=("transfer", *SWEEP),
    help="Fine-tune targets at several training sizes from the plain encoder and from encoders refined on other "
         "tasks (--refine-on, repeatable); does refinement help tasks it never saw?"))
register_study_kind(Study(
    "select", SELECT, format=selection_markdown, write=write_selection, rejudge=rejudge_select,
    run=_stage("mtbio.experiments.select", "select"), options=("target", "select", "affinity", *SWEEP),
    help="Choose a target's partners: rank the candidates with a transfer predictor, verify the top K as pairs, "
         "then compare the target trained with the selected partners, alone and with every candidate."))
