"""Every committed study's comparisons judged by rule v1 and by rule v2, from the per-seed scores its files hold
(nothing is trained), and each comparison whose verdict or state differs listed old -> new with its Δ and the
interval v2 read it from (issue 64).

    python examples/decision_rule_v2.py --rewrite   # first rewrites every study's files under v2 with `mtbio report`
    python examples/decision_rule_v2.py             # only lists (examples/decision_rule_v2/changes.json)

`--rewrite` runs, per study directory, `mtbio report DIR` (the biomedical graph with `--looks 3:8`, the adaptive
design it was run with), and per table the `mtbio report` command that made it, read back from the table's JSON.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from mtbio.fileio import write_json
from mtbio.reporting.rejudge import rejudge, saved_looks
from mtbio.reporting.verdicts import Rule, verdict_text

HERE = Path(__file__).resolve().parent
STUDIES = ["pairwise_biomedical/relations.json", "pairwise_clinical_public/relations.json",
           "stilt_biomedical/stilt.json", "transfer_biomedical/transfer.json",
           *(f"{study}/{t}/select.json" for study in ("select_biomedical", "select_biomedical_steps")
             for t in ("ncbi-disease", "mqp", "hoc")),
           "adapters_biomedical/table-dev.json", "adapters_biomedical/table-test.json",
           "mtbert_biomedical/table-dev.json", "mtbert_biomedical/table-test.json",
           "mtbert_biomedical/table-dev-ddi-macro.json", "mtbert_biomedical/table-test-ddi-macro.json",
           "select_training/table-dev.json", "select_training/table-dev-arms.json",
           *(f"stabilization/{d}/table-{split}.json" for d in ("bioasq-lr2e-4", "bioasq-lr2e-5", "bioasq-lr5e-5",
                                                              "mediqa-rqe-lr2e-4", "mediqa-rqe-lr5e-5", "mqp-lr2e-4",
                                                              "mqp-lr5e-5") for split in ("dev", "test"))]


def comparisons(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every judged comparison of a study file, by a readable name."""
    kind = data.get("kind") or "table"
    if kind in ("pairwise",):
        return {f"{e['source']} -> {e['target']}": e for e in data["edges"]}
    if kind == "stilt":
        return {f"{i} -> {r['target']}": c for r in data["targets"] for i, c in r["intermediate"].items()}
    if kind == "transfer":
        found = {f"{n} -> {r['target']} @ {p['size']}": c for r in data["targets"] for p in r["points"]
                 for n, c in p["from"].items()}
        return {**found, **{f"average: {n}": c for n, c in data["average"]["pairs"].items()}}
    if kind == "select":
        found = {f"pair {n}": c for n, c in (data.get("pairs") or {}).items()}
        for key in ("outcome", "outcome_dev"):
            found.update({f"{key}: {n}": c for n, c in data.get(key, {}).get("comparisons", {}).items()})
        return found
    return {f"{r['task']}: {label}": c for r in data["rows"] for label, c in (r.get("verdicts") or {}).items() if c}


def state(cell: dict[str, Any]) -> str:
    return verdict_text(cell) if verdict_text(cell) in ("undecided",) or cell.get("withheld") else \
        f"{cell['verdict']} ({cell['state']})"


ADAPTIVE = {"pairwise_biomedical": "3:8"}  # studies run with --seeds auto whose files predate recording it


def report_command(name: str) -> list[str]:
    """The `mtbio report` command that rewrites study file `name` under the default rule."""
    folder = (HERE / name).parent
    data = json.loads((HERE / name).read_text())
    if data.get("kind"):
        looks = ADAPTIVE.get(folder.name)
        return ["mtbio", "report", str(folder.relative_to(HERE.parent)), *(["--looks", looks] if looks else [])]
    command = ["mtbio", "report", *(c["path"] for c in data["columns"])]
    command += [arg for c in data["columns"] for arg in ("--label", c["label"])] + ["--split", data["split"]]
    command += [arg for task, metric in data["metric_overrides"].items() for arg in ("--metric", f"{task}={metric}")]
    if data["has_trivial"]:
        command += ["--trivial", "--data-dir", os.environ.get("MTBIO_DATA_DIR", "../shared/data")]
    versus = data["compare_to"]
    command += ["--compare-to", versus["baseline"]]
    if versus["versus"] != [data["columns"][-1]["label"]]:
        command.append("--compare-each")
    return command + ["--output", str((HERE / name).with_suffix(".md").relative_to(HERE.parent))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path, default=HERE / "decision_rule_v2" / "changes.json")
    parser.add_argument("--rewrite", action="store_true", help="rewrite every study's files under v2 first")
    args = parser.parse_args()
    if args.rewrite:
        for name in STUDIES:
            command = report_command(name)
            print(shlex.join(command), flush=True)
            subprocess.run(command, cwd=HERE.parent, check=True, stdout=subprocess.DEVNULL)
    changes, counts = [], {}
    for name in STUDIES:
        saved = json.loads((HERE / name).read_text())
        looks = saved_looks(saved)
        old = comparisons(rejudge(copy.deepcopy(saved), Rule(version="v1", looks=looks)))
        new = comparisons(rejudge(copy.deepcopy(saved), Rule(looks=looks)))
        counts[name] = {"comparisons": len(new), "changed": 0, "looks": list(looks) if looks else None}
        for key, cell in new.items():
            before, after = state(old[key]), state(cell)
            if before == after:
                continue
            counts[name]["changed"] += 1
            ci = cell.get("ci")
            changes.append({"study": name, "comparison": key, "delta": cell["delta"], "n_seeds": cell["n_seeds"],
                            "ci": ci, "ci_level": cell.get("ci_level"), "min_delta": cell.get("min_delta"),
                            "v1": before, "v2": after})
            interval = f"[{ci[0]:+.4f}, {ci[1]:+.4f}] at {cell['ci_level'] * 100:.3g}%" if ci else "-"
            print(f"| {name} | {key} | {cell['delta']:+.4f} | {interval} | {before} | {after} |")
    for name, found in counts.items():
        print(f"{name}: {found['changed']} of {found['comparisons']} changed")
    write_json(args.output, {"studies": counts, "changes": changes})


if __name__ == "__main__":
    main()
