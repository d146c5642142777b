"""Every committed study's comparisons judged by the rule its file records (v2) and by rule v3, from the per-seed
scores its files hold (nothing is trained); each comparison whose verdict differs is listed old -> new with its Δ
and the interval v3 read it from (issue 92 item 1), and the count of comparisons that move from undecided to a
direction.

    python examples/rejudge_v3.py --rewrite   # first writes every study's files again under the rule each records
    python examples/rejudge_v3.py             # only lists (examples/rejudge_v3/changes.json)

`--rewrite` judges each file again under its own rule and writes it (and what is drawn from it: graphs, matrices,
select.md, a runs table's markdown and CSV) with the writers `mtbio report` uses, so that every verdict word comes
from the one renderer (issue 91 G6: "undecided" and "no verdict" where a file once said "no effect").
"""
from __future__ import annotations

import argparse
import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from decision_rule_v2 import STUDIES as V2_STUDIES, comparisons

from mtbio.fileio import write_json, write_text
from mtbio.reporting.rejudge import recorded_rule, rejudge
from mtbio.reporting.relations import write_relations, write_stilt
from mtbio.reporting.selection import selection_markdown
from mtbio.reporting.tables import to_markdown, write_csv
from mtbio.reporting.transfer import write_transfer
from mtbio.reporting.verdicts import (HIGHER_BEYOND, HURTS, IMPROVES, LOWER_BEYOND, NO_EFFECT, NO_EFFECT_BEYOND,
                                      UNDECIDED_WORD, direction, verdict_text)

HERE = Path(__file__).resolve().parent
SAME = {IMPROVES: HIGHER_BEYOND, HURTS: LOWER_BEYOND, NO_EFFECT: NO_EFFECT_BEYOND}  # v2's words in v3's
STUDIES = [*V2_STUDIES, *(f"select_biomedical_floor/{t}/select.json" for t in ("ncbi-disease", "mqp", "hoc"))]


def rewrite(name: str) -> None:
    """Study file `name` judged again under the rule it records, written back with what is drawn from it."""
    path = HERE / name
    data = json.loads(path.read_text())
    data = rejudge(data, recorded_rule(data))
    kind = data.get("kind") or "table"
    if kind == "pairwise":
        write_relations(path.parent, data)
    elif kind == "stilt":
        write_stilt(path.parent, data)
    elif kind == "transfer":
        write_transfer(path.parent, data)
    elif kind == "select":
        write_json(path, data)
        write_text(path.parent / "select.md", selection_markdown(data))
    else:
        write_text(path.with_suffix(".md"), to_markdown(data))
        write_csv(data, path.with_suffix(".csv"))
        write_json(path, data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path, default=HERE / "rejudge_v3" / "changes.json")
    parser.add_argument("--rewrite", action="store_true", help="write every study's files again under its own rule")
    args = parser.parse_args()
    if args.rewrite:
        for name in STUDIES:
            rewrite(name)
    changes: list[dict[str, Any]] = []
    counts: dict[str, dict[str, Any]] = {}
    for name in STUDIES:
        saved = json.loads((HERE / name).read_text())
        rule = recorded_rule(saved)
        old = comparisons(rejudge(copy.deepcopy(saved), rule))
        new = comparisons(rejudge(copy.deepcopy(saved), replace(rule, version="v3")))
        found = counts[name] = {"rule": rule.version, "comparisons": len(new), "changed": 0, "to_direction": 0}
        for key, cell in new.items():
            before, after = verdict_text(old[key]), verdict_text(cell)
            if SAME.get(before, before) == after:
                continue
            found["changed"] += 1
            found["to_direction"] += before == UNDECIDED_WORD and direction(cell) != 0
            ci = cell.get("ci")
            changes.append({"study": name, "comparison": key, "delta": cell["delta"], "n_seeds": cell["n_seeds"],
                            "ci": ci, "ci_level": cell.get("ci_level"), "old": before, "new": after})
            interval = f"[{ci[0]:+.4f}, {ci[1]:+.4f}] at {cell['ci_level'] * 100:.3g}%" if ci else "-"
            print(f"| {name} | {key} | {cell['delta']:+.4f} | {interval} | {before} | {after} |")
    for name, found in counts.items():
        print(f"{name}: {found['changed']} of {found['comparisons']} changed, {found['to_direction']} from undecided "
              f"to a direction")
    total = {k: sum(f[k] for f in counts.values()) for k in ("comparisons", "changed", "to_direction")}
    print(f"all: {total['changed']} of {total['comparisons']} changed, {total['to_direction']} from undecided to a "
          f"direction")
    write_json(args.output, {"studies": counts, "total": total, "changes": changes})


if __name__ == "__main__":
    main()
