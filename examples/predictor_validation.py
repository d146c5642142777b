"""Judge every committed transfer predictor against the committed pairwise graphs (issue 31), within target.

For each graph (examples/pairwise_<domain>/relations.json) and each predictor's affinity.json (the TAG
lookahead and gradient cosine of the like-for-like affinity run, 3 epochs; size_ratio, text_similarity and
fisher from examples/predictors_<domain>/), the harness of `mtbio report PAIRWISE PREDICTION` (within-target
Spearman with its exact two-sided permutation p and bootstrap interval, top-1 against chance, NDCG@1, regret@1, the
fraction of the noise ceiling). The permutation p values of one graph's predictors are Holm-adjusted together
(the family: the predictors judged on that graph), and again over every predictor × graph judged (`holm_all_p`,
12 tests: a claim about predictors in general). A last family pools the eight targets of both graphs
(their tasks are disjoint): one mean within-target Spearman per predictor over all eight. Writes examples/predictor_validation/summary.json and
prints the page's table. Nothing is trained; it reads committed files only.

    python examples/predictor_validation.py [--output DIR]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mtbio.fileio import write_json
from mtbio.reporting.affinity import compare_prediction
from mtbio.reporting.prediction_quality import within_target_summary
from mtbio.reporting.verdicts import adjust

HERE = Path(__file__).resolve().parent
GRAPHS = {
    "biomedical": ["affinity_biomedical", "predictors_biomedical/size_ratio",
                   "predictors_biomedical/text_similarity", "predictors_biomedical/fisher",
                   "predictors_biomedical/same_type"],
    "clinical-public": ["affinity_clinical_public_3epochs", "predictors_clinical_public/size_ratio",
                        "predictors_clinical_public/text_similarity", "predictors_clinical_public/fisher",
                        "predictors_clinical_public/same_type"],
}


def judge(domain: str, sources: list[str]) -> dict[str, Any]:
    """One graph's predictors, within target, with Holm-adjusted permutation p values."""
    relations = json.loads((HERE / f"pairwise_{domain.replace('-', '_')}" / "relations.json").read_text())
    rows: dict[str, Any] = {}
    ceiling: dict[str, Any] = {}
    for source in sources:
        compared = compare_prediction(relations, json.loads((HERE / source / "affinity.json").read_text()))
        ceiling = compared["within_target_ceiling"]
        for name, entry in compared["predictors"].items():
            within = entry["within_target"]
            rows[name] = {"source": f"examples/{source}", **{key: within.get(key) for key in (
                "targets", "spearman", "spearman_interval", "permutation_p", "top1", "chance_top1", "ndcg@1",
                "regret@1", "fraction_of_ceiling", "symmetric", "per_target")}, "pooled_spearman": entry["spearman"]}
    adjusted = adjust([row["permutation_p"] for row in rows.values()], "holm")
    for row, p in zip(rows.values(), adjusted):
        row["holm_p"] = p
    return {"seeds": relations["seeds"], "ceiling": ceiling, "family": sorted(rows), "predictors": rows}


def judge_pooled() -> dict[str, Any]:
    """Every predictor over the targets of both graphs at once, Holm over the predictors."""
    measured: dict[tuple[str, str], float] = {}
    predicted: dict[str, dict[tuple[str, str], float]] = {}
    tasks: list[str] = []
    sources: dict[str, list[str]] = {}
    for domain, folders in GRAPHS.items():
        relations = json.loads((HERE / f"pairwise_{domain.replace('-', '_')}" / "relations.json").read_text())
        measured.update({(e["source"], e["target"]): float(e["delta"]) for e in relations["edges"]})
        tasks += [n["task"] for n in relations["nodes"]]
        for folder in folders:
            for name, entry in json.loads((HERE / folder / "affinity.json").read_text())["predictors"].items():
                predicted.setdefault(name, {}).update({(e["source"], e["target"]): float(e["score"])
                                                       for e in entry["edges"]})
                sources.setdefault(name, []).append(f"examples/{folder}")
    rows = {}
    for name, scores in predicted.items():
        within = within_target_summary(scores, measured, tasks, {})
        rows[name] = {"sources": sources[name], **{key: within.get(key) for key in (
            "targets", "spearman", "spearman_interval", "permutation_p", "permutation_exact", "top1", "chance_top1",
            "ndcg@1", "regret@1")}}
    for row, p in zip(rows.values(), adjust([row["permutation_p"] for row in rows.values()], "holm")):
        row["holm_p"] = p
    return {"family": sorted(rows), "predictors": rows}


def table(domain: str, judged: dict[str, Any]) -> str:
    """The page's markdown table of one graph."""
    lines = [f"| {domain} predictor | within-target ρ [95% CI] | two-sided perm. p (Holm per graph; over all) | "
             "top-1 (chance) | NDCG@1 | regret@1 | of ceiling | pooled ρ |", "|---|---|---|---|---|---|---|---|"]
    for name, row in sorted(judged["predictors"].items(), key=lambda kv: -kv[1]["spearman"]):
        low, high = row["spearman_interval"]
        mark = " (symmetric)" if row["symmetric"] else ""
        pooled = "–" if row["pooled_spearman"] != row["pooled_spearman"] else f"{row['pooled_spearman']:+.2f}"
        lines.append(f"| {name}{mark} | {row['spearman']:+.3f} [{low:+.2f}, {high:+.2f}] | {row['permutation_p']:.3f} "
                     f"({row['holm_p']:.3f}; {row['holm_all_p']:.3f}) | {row['top1']:.2f} ({row['chance_top1']:.2f}) | {row['ndcg@1']:.2f} | "
                     f"{100 * row['regret@1']:.2f} | {row['fraction_of_ceiling']:+.2f} | {pooled} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=HERE / "predictor_validation")
    args = parser.parse_args()
    summary = {domain: judge(domain, sources) for domain, sources in GRAPHS.items()}
    every = [row for domain in GRAPHS for row in summary[domain]["predictors"].values()]
    for row, p in zip(every, adjust([row["permutation_p"] for row in every], "holm")):
        row["holm_all_p"] = p
    summary["pooled"] = judge_pooled()
    write_json(args.output / "summary.json", summary)
    print("\nboth graphs, 8 targets: " + "; ".join(
        f"{name} {row['spearman']:+.3f} [{row['spearman_interval'][0]:+.2f}, {row['spearman_interval'][1]:+.2f}] "
        f"p {row['permutation_p']:.3f} (Holm {row['holm_p']:.3f}), top-1 {row['top1']:.2f}"
        for name, row in sorted(summary["pooled"]["predictors"].items(), key=lambda kv: -kv[1]["spearman"])))
    for domain in GRAPHS:
        judged = summary[domain]
        c = judged["ceiling"]
        print(f"\n{domain}: {len(judged['seeds'])} seeds; within-target seed-pair Spearman {c['r1']:+.2f}, "
              f"noise ceiling {c['ceiling']:.2f}\n")
        print(table(domain, judged))


if __name__ == "__main__":
    main()
