"""A study's saved comparisons judged again under another decision rule, from their per-seed scores, without
training (`mtbio report DIR --rule v1|v2`): a pairwise graph's edges, a STILT matrix, a transfer table and its
average, a selection's pairs and outcome, a runs table's --compare-to columns. Each family is the one the study
corrected over; a study's own re-judge is part of its registration (`mtbio.reporting.studies`)."""
from __future__ import annotations

from typing import Any

from mtbio.errors import MtbioError
from mtbio.reporting.studies import STUDIES, studies
from mtbio.reporting.transfer import average_starts
from mtbio.reporting.verdicts import Rule, correct, recompare

Document = dict[str, Any]


def _family(cells: dict[str, tuple[dict[str, Any], str | None]], rule: Rule) -> tuple[dict[str, Any], dict]:
    """Re-measure every (cell, metric) and judge them as one family; returns the new cells and the family."""
    fresh = {name: recompare(cell, metric) for name, (cell, metric) in cells.items()}
    return fresh, correct(fresh, rule)


def rejudge_pairwise(data: Document, rule: Rule) -> None:
    """A pairwise graph judged again under `rule`, in place."""
    metric = {n["task"]: n["metric"] for n in data["nodes"]}
    fresh, data["family"] = _family({f"{e['source']}->{e['target']}": (e, metric[e["target"]]) for e in data["edges"]},
                                    rule)
    data["edges"] = [fresh[f"{e['source']}->{e['target']}"] for e in data["edges"]]
    data.update(rule.fields())


def rejudge_stilt(data: Document, rule: Rule) -> None:
    """A STILT matrix judged again under `rule`, in place."""
    fresh, data["family"] = _family({f"{i}->{r['target']}": (c, r["metric"]) for r in data["targets"]
                                     for i, c in r["intermediate"].items()}, rule)
    for row in data["targets"]:
        row["intermediate"] = {i: fresh[f"{i}->{row['target']}"] for i in row["intermediate"]}
    data.update(rule.fields())


def rejudge_transfer(data: Document, rule: Rule) -> None:
    """A transfer table and its average judged again under `rule`, in place."""
    cells = {f"{name}->{row['target']}@{point['size']}": (cell, row["metric"]) for row in data["targets"]
             for point in row["points"] for name, cell in point["from"].items()}
    fresh, data["family"] = _family(cells, rule)
    for row in data["targets"]:
        for point in row["points"]:
            for name, cell in point["from"].items():
                interval = cell["score"].get("interval")
                point["from"][name] = fresh[f"{name}->{row['target']}@{point['size']}"]
                point["from"][name]["score"]["interval"] = interval
    data["average"] = average_starts(data["targets"], list(data["refinement_sets"]), rule)
    data.update(rule.fields())


def rejudge_select(data: Document, rule: Rule) -> None:
    """A selection judged again under `rule`, in place."""
    metric = data["outcome"]["metric"]
    if data.get("pairs"):
        data["pairs"], data["pairs_family"] = _family({c: (cell, metric) for c, cell in data["pairs"].items()}, rule)
    for key in ("outcome", "outcome_dev"):
        if key in data:
            outcome = data[key]
            outcome["comparisons"], outcome["family"] = _family(
                {name: (cell, metric) for name, cell in outcome["comparisons"].items()}, rule)
            outcome.update(rule.fields())
    data["correction"] = rule.correction


def _table(data: Document, rule: Rule) -> None:
    versus = data["compare_to"]
    cells = {f"{row['task']}: {label}": (cell, row["metric"]) for row in data["rows"]
             for label, cell in (row.get("verdicts") or {}).items() if cell is not None}
    if any("per_seed" not in cell for cell, _ in cells.values()):
        raise MtbioError("a table written before its comparisons kept their per-seed scores: run the mtbio report "
                         "command that made it again")
    fresh, versus["family"] = _family(cells, rule)
    for row in data["rows"]:
        row["verdicts"] = {label: None if cell is None else fresh[f"{row['task']}: {label}"]
                           for label, cell in (row.get("verdicts") or {}).items()}
        row["verdict"] = row["verdicts"].get(data["columns"][-1]["label"])
    versus.update(rule.fields())


def rejudge(data: Document, rule: Rule) -> Document:
    """`data` (a study's summary file, or a runs table with --compare-to) with every comparison judged again under
    `rule`, in place, by the re-judge of the study its `kind` names."""
    kind = data.get("kind") or ("table" if data.get("compare_to") else None)
    if kind == "table":
        _table(data, rule)
        return data
    known = [s.name for s in studies() if s.rejudge is not None]
    if kind not in known:
        raise MtbioError(f"no comparisons to judge again in a '{kind}' file (known: {', '.join([*known, 'table'])})")
    rejudge_study = STUDIES.get(kind).rejudge
    assert rejudge_study is not None
    rejudge_study(data, rule)
    return data


def saved_looks(data: Document) -> tuple[int, int] | None:
    """The adaptive looks a summary file recorded with its rule (None: fixed seeds, or not recorded)."""
    looks = (data.get("decision_rule") or {}).get("looks")
    if not looks and data.get("kind") == "select":
        looks = ((data.get("outcome") or {}).get("decision_rule") or {}).get("looks")
    return (int(looks[0]), int(looks[1])) if looks else None


def recorded_rule(data: Document) -> Rule:
    """The rule a summary file records it was judged by (v1 for a file that predates recording it)."""
    found = (data.get("decision_rule") or (data.get("compare_to") or {}).get("decision_rule")
             or ((data.get("outcome") or {}).get("decision_rule") if data.get("kind") == "select" else None) or {})
    defaults = Rule()
    return Rule(found.get("version", "v1"), found.get("alpha", defaults.alpha), found.get("min_delta"),
                found.get("correction", defaults.correction), found.get("spending", defaults.spending),
                saved_looks(data), found.get("primary"))
