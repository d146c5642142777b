"""Predicted task relations (`mtbio affinity --predictor NAME`), and their check against a measured
pairwise graph (`mtbio report PAIRWISE_DIR AFFINITY_DIR`).

affinity.json holds, per predictor, one edge per ordered pair source → target: the score (mean
over seeds of the mean over the measurement points), its spread over the points (sd_points,
averaged over seeds) and over seeds (sd_seeds), the per-seed means, and a verdict (sign of the
score, tested over seeds, or over the points with one seed). One joint run gives two predictors
(lookahead: TAG's 1 − L_t(after a step on s) / L_t(before); cosine: the encoder gradients' cosine)
and a graph drawn with the pairwise writers (`mtbio.reporting.relations`); a predictor without a
joint run (`build_scores`) gives its own, marked `symmetric` where score(s → t) = score(t → s).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mtbio.errors import MtbioError
from mtbio.fileio import write_json, write_text
from mtbio.reporting.relations import PAIRWISE, relations_dot, write_graphml, write_matrix_csv
from mtbio.reporting.verdicts import judge, summary
from mtbio.run_dir import SweepDir, register_study

AFFINITY = register_study("affinity", "affinity.json")  # predicted transfer between tasks

JOINT_PREDICTORS = ("lookahead", "cosine")  # both measured in one joint run
# chosen on the synthetic helper / noise setup (tests/test_affinity.py), where the gradient cosine ranks the
# helper first and the noise task last and the one-step lookahead does not; `mtbio report PAIRWISE AFFINITY`
# shows how both rank against a measured graph
DEFAULT_PREDICTOR = "cosine"
RULE = ("predicted edge: improves/hurts when the mean score is positive/negative and a two-sided t-test over seeds "
        "(one seed: over the measurement points) gives p < alpha")
CAPTIONS = {"lookahead": "lookahead affinity 1 − L_t(after a step on s) / L_t(before)",
            "cosine": "gradient cosine on the shared encoder"}
BOOTSTRAP = 2000


# ---- building and writing ---------------------------------------------------------------------------
def build_affinity(metrics: Mapping[str, str], runs: Mapping[int, dict[str, Any]], alpha: float,
                   default: str = DEFAULT_PREDICTOR) -> dict[str, Any]:
    """affinity.json's content from the joint runs of each seed: {seed: {"probe": AffinityProbe.summary(),
    "results": the run's results.json}}; `default` is the predictor its graph shows."""
    tasks, seeds = list(metrics), sorted(runs)
    for seed in seeds:
        if not runs[seed]["probe"]["points"]:
            raise MtbioError(f"affinity: the run of seed {seed} has no measurement point")
    predictors = {}
    for predictor in JOINT_PREDICTORS:
        edges = []
        for target in tasks:
            for source in tasks:
                if source != target:
                    values = {s: [p[predictor][source][target] for p in runs[s]["probe"]["points"]] for s in seeds}
                    edges.append(_edge(source, target, values, alpha))
        predictors[predictor] = {"caption": CAPTIONS[predictor], "symmetric": predictor == "cosine", "edges": edges}
    nodes = [{"task": t, "metric": metrics[t], "joint_dev": summary({s: float(runs[s]["results"]["dev"][t][metrics[t]])
                                                                     for s in seeds})} for t in tasks]
    probes = [runs[s]["probe"] for s in seeds]
    compute = {"train_examples": sum(int(runs[s]["results"]["train_examples"]) for s in seeds),
               "measure_backward_examples": sum(p["backward_examples"] for p in probes),
               "measure_forward_examples": sum(p["forward_examples"] for p in probes),
               "measure_seconds": sum(p["seconds"] for p in probes),
               "wall_seconds": sum(float(runs[s]["results"]["wall_seconds"]) for s in seeds),
               "points": {str(s): len(runs[s]["probe"]["points"]) for s in seeds}}
    return {"kind": "affinity", "tasks": tasks, "seeds": seeds, "default_predictor": default,
            "alpha": alpha, "rule": RULE, "measurement": {k: probes[0][k] for k in ("every", "batch_size", "split")},
            "nodes": nodes, "predictors": predictors, "compute": compute}


def build_scores(name: str, caption: str, symmetric: bool, metrics: Mapping[str, str],
                 scores: Mapping[int, Mapping[str, Mapping[str, float]]], alpha: float,
                 compute: Mapping[str, Any], measurement: Mapping[str, Any]) -> dict[str, Any]:
    """affinity.json's content for a predictor without a joint run: `scores` is {seed: {source: {target:
    score}}}; `compute` counts its training examples (train_examples), examples run forward and backward
    (measure_backward_examples) or forward only (measure_forward_examples), and its seconds."""
    tasks, seeds = list(metrics), sorted(scores)
    edges = [_edge(source, target, {s: [float(scores[s][source][target])] for s in seeds}, alpha)
             for target in tasks for source in tasks if source != target]
    seconds = float(compute.get("wall_seconds", 0.0))
    return {"kind": "affinity", "tasks": tasks, "seeds": seeds, "default_predictor": name, "alpha": alpha,
            "rule": "predicted edge: improves/hurts by the sign of the score (a t-test over seeds with several)",
            "measurement": dict(measurement), "nodes": [{"task": t, "metric": metrics[t]} for t in tasks],
            "predictors": {name: {"caption": caption, "symmetric": symmetric, "edges": edges}},
            "compute": {"train_examples": 0, "measure_backward_examples": 0, "measure_forward_examples": 0,
                        "measure_seconds": seconds, "wall_seconds": seconds, **compute}}


def _edge(source: str, target: str, values: dict[int, list[float]], alpha: float) -> dict[str, Any]:
    means = {s: statistics.fmean(v) for s, v in values.items()}
    spreads = [statistics.stdev(v) for v in values.values() if len(v) > 1]
    samples = list(means.values()) if len(means) > 1 else next(iter(values.values()))
    evidence = judge(samples, alpha, 0.0)
    return {"source": source, "target": target, "score": statistics.fmean(means.values()),
            "sd_points": statistics.fmean(spreads) if spreads else None,
            "sd_seeds": statistics.stdev(means.values()) if len(means) > 1 else None,
            "p_value": evidence.p_value, "verdict": evidence.verdict,
            "n_points": sum(len(v) for v in values.values()), "per_seed": {str(s): m for s, m in means.items()}}


def score_matrix(affinity: dict[str, Any], predictor: str) -> list[list[float | None]]:
    """Rows = target, columns = source, as `gain_matrix`; None on the diagonal."""
    scores = {(e["target"], e["source"]): e["score"] for e in affinity["predictors"][predictor]["edges"]}
    return [[scores.get((t, s)) for s in affinity["tasks"]] for t in affinity["tasks"]]


def predicted_graph(affinity: dict[str, Any], predictor: str) -> dict[str, Any]:
    """The predicted graph in relations.json's shape (nodes show the joint run's dev score), for the
    pairwise graph writers."""
    nodes = [{"task": n["task"], "metric": n["metric"], "baseline": n["joint_dev"]} for n in affinity["nodes"]]
    edges = [{"source": e["source"], "target": e["target"], "delta": e["score"], "sd": e["sd_seeds"],
              "p_value": e["p_value"], "verdict": e["verdict"], "n_seeds": len(affinity["seeds"]),
              "per_seed": {s: {"delta": v} for s, v in e["per_seed"].items()}}
             for e in affinity["predictors"][predictor]["edges"]]
    return {"kind": f"affinity-{predictor}", "split": "train", "seeds": affinity["seeds"], "rule": affinity["rule"],
            "nodes": nodes, "edges": edges}


def write_affinity(directory: Path, affinity: dict[str, Any]) -> list[Path]:
    """affinity.json; per predictor <name>_matrix.csv/.png (lookahead's is affinity_matrix); after a
    joint run, the default predictor's graph as affinity.dot, .graphml and .png. Returns the paths."""
    from mtbio.reporting.plots import plot_relation_graph, plot_score_matrix

    paths = [SweepDir(directory).summary_file(AFFINITY)]
    write_json(paths[0], affinity)
    for predictor, entry in affinity["predictors"].items():
        stem = "affinity" if predictor == "lookahead" else predictor
        matrix = score_matrix(affinity, predictor)
        csv_path, png_path = directory / f"{stem}_matrix.csv", directory / f"{stem}_matrix.png"
        write_matrix_csv(csv_path, "target \\ source", affinity["tasks"], affinity["tasks"], matrix)
        plot_score_matrix(png_path, affinity["tasks"], matrix, f"{entry['caption']} ({len(affinity['seeds'])} "
                          "seed(s))", predictor)
        paths += [csv_path, png_path]
    if not all("joint_dev" in node for node in affinity["nodes"]):
        return paths  # no joint run: no dev scores for the graph's nodes
    predictor = affinity["default_predictor"]
    graph = predicted_graph(affinity, predictor)
    title = (f"predicted by one joint run ({predictor}, {len(affinity['seeds'])} seed(s)): green helps, red hurts, "
             "grey unclear")
    dot, graphml, png = (directory / f"affinity.{ext}" for ext in ("dot", "graphml", "png"))
    write_text(dot, relations_dot(graph, title, "{:+.3g}"))
    write_graphml(graph, graphml)
    plot_relation_graph(graph, png, title + "\nnode: dev score in the joint run; edge s→t: predicted score", "{:+.3g}")
    return paths + [dot, graphml, png]


def read_json(directory: Path, name: str) -> dict[str, Any]:
    path = Path(directory) / name
    if not path.is_file():
        raise MtbioError(f"{directory}: no {name}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise MtbioError(f"{path}: not JSON ({exc})") from None


# ---- pruning a pairwise sweep ------------------------------------------------------------------------
def pruned_pairs(affinity: dict[str, Any], tasks: list[str], k: int, predictor: str) -> set[frozenset[str]]:
    """The pairs that hold one of each target's `k` highest-scored sources among `tasks`."""
    missing = [t for t in tasks if t not in affinity["tasks"]]
    if missing:
        raise MtbioError(f"the affinity run has no task {', '.join(missing)}; run mtbio affinity on these tasks")
    if predictor not in affinity["predictors"]:
        known = ", ".join(affinity["predictors"])
        raise MtbioError(f"the affinity run has no predictor '{predictor}' (it has: {known})")
    scores = {(e["source"], e["target"]): e["score"] for e in affinity["predictors"][predictor]["edges"]}
    keep = set()
    for target in tasks:
        ranked = sorted((s for s in tasks if s != target), key=lambda s: -scores[(s, target)])
        keep |= {frozenset((s, target)) for s in ranked[:k]}
    return keep


# ---- prediction against measurement ------------------------------------------------------------------
def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy.stats import kendalltau, spearmanr

    return float(spearmanr(x, y).statistic), float(kendalltau(x, y).statistic)


def _resampled_correlations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spearman and Kendall's tau-b of each row pair of `x` and `y` (resamples × pairs) at once, with
    ties as scipy's `spearmanr` (average ranks) and `kendalltau` (tau-b) treat them."""
    from scipy.stats import rankdata

    rx, ry = (r - r.mean(axis=1, keepdims=True) for r in (rankdata(x, axis=1), rankdata(y, axis=1)))
    rho = (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    sx, sy = (np.sign(v[:, :, None] - v[:, None, :]) for v in (x, y))  # both orders of each pair: ratios hold
    tau = (sx * sy).sum(axis=(1, 2)) / np.sqrt((sx * sx).sum(axis=(1, 2)) * (sy * sy).sum(axis=(1, 2)))
    return rho, tau


def bootstrap_interval(x: np.ndarray, y: np.ndarray, rounds: int = BOOTSTRAP, seed: int = 0) -> dict[str, list[float]]:
    """95% percentile intervals of Spearman and Kendall over pairs resampled with replacement
    (resamples where either side is constant are left out)."""
    idx = np.random.default_rng(seed).integers(0, len(x), (rounds, len(x)))
    xs, ys = np.asarray(x, dtype=float)[idx], np.asarray(y, dtype=float)[idx]
    varied = (np.ptp(xs, axis=1) > 0) & (np.ptp(ys, axis=1) > 0)
    if not varied.any():
        return {"spearman": [float("nan")] * 2, "kendall": [float("nan")] * 2}
    return {name: [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]
            for name, values in zip(("spearman", "kendall"), _resampled_correlations(xs[varied], ys[varied]))}


def top_k(predicted: dict[tuple[str, str], float], measured: dict[tuple[str, str], float], tasks: list[str],
          k: int) -> dict[str, Any]:
    """Per target with more than k partners: the share of its predicted top-k partners that are in its
    measured top-k (precision), that have a measured Δ > 0 (helpful), and the precision of a random pick."""
    precision, helpful, chance = [], [], []
    for target in tasks:
        partners = [s for s in tasks if (s, target) in predicted and (s, target) in measured]
        if len(partners) <= k:
            continue
        guess = sorted(partners, key=lambda s: -predicted[(s, target)])[:k]
        truth = sorted(partners, key=lambda s: -measured[(s, target)])[:k]
        precision.append(len(set(guess) & set(truth)) / k)
        helpful.append(sum(measured[(s, target)] > 0 for s in guess) / k)
        chance.append(k / len(partners))
    mean = (lambda v: statistics.fmean(v) if v else None)
    return {"k": k, "targets": len(precision), "precision": mean(precision), "helpful": mean(helpful),
            "chance": mean(chance)}


def seed_agreement(edges: list[dict[str, Any]], value: Any) -> float | None:
    """How well one seed's ranking of the ordered pairs reproduces another's: the mean Spearman over
    every two seeds of `value(edge, seed)` across `edges` (None with fewer than two seeds or three
    edges). It bounds what any prediction of these edges can reach: a ranking that does not repeat
    across seeds is mostly noise."""
    from itertools import combinations

    from scipy.stats import spearmanr

    seeds = sorted(set.intersection(*(set(e.get("per_seed", {})) for e in edges))) if edges else []
    if len(seeds) < 2 or len(edges) < 3:
        return None
    vectors = {seed: [float(value(e, seed)) for e in edges] for seed in seeds}
    found = [spearmanr(vectors[a], vectors[b]).statistic for a, b in combinations(seeds, 2)]
    found = [float(v) for v in found if v == v]
    return float(np.mean(found)) if found else None


def compare_prediction(relations: dict[str, Any], affinity: dict[str, Any],
                       rounds: int = BOOTSTRAP) -> dict[str, Any]:
    """Each predictor's scores against the measured mean Δ over the ordered pairs both hold."""
    from mtbio.reporting.prediction_quality import within_target_ceiling, within_target_summary

    measured = {(e["source"], e["target"]): float(e["delta"]) for e in relations["edges"]}
    tasks = [n["task"] for n in relations["nodes"]]
    per_seed = {(e["source"], e["target"]): {s: float(v["delta"]) for s, v in e.get("per_seed", {}).items()}
                for e in relations["edges"]}
    ceiling = within_target_ceiling(per_seed, tasks)
    out: dict[str, Any] = {"measured_pairs": len(measured), "predictors": {},
                           "measured_seed_agreement": seed_agreement(relations["edges"],
                                                                     lambda e, s: e["per_seed"][s]["delta"]),
                           "within_target_ceiling": ceiling}
    for predictor in affinity["predictors"]:
        predicted = {(e["source"], e["target"]): float(e["score"]) for e in affinity["predictors"][predictor]["edges"]}
        pairs = sorted(set(measured) & set(predicted))
        if len(pairs) < 2:
            raise MtbioError(f"only {len(pairs)} ordered pair(s) are in both the pairwise and the affinity run; "
                             "compare runs on the same tasks")
        x = np.array([predicted[p] for p in pairs])
        y = np.array([measured[p] for p in pairs])
        rho, tau = _correlations(x, y)
        partners = len(tasks) - 1
        out["predictors"][predictor] = {
            "pairs": len(pairs), "spearman": rho, "kendall": tau, "interval": bootstrap_interval(x, y, rounds),
            "seed_agreement": seed_agreement(affinity["predictors"][predictor]["edges"], lambda e, s: e["per_seed"][s]),
            "top_k": [top_k(predicted, measured, tasks, k) for k in range(1, min(3, partners - 1) + 1)],
            "within_target": within_target_summary(predicted, measured, tasks, ceiling),
            "points": [{"source": s, "target": t, "predicted": predicted[(s, t)], "measured": measured[(s, t)]}
                       for s, t in pairs]}
    best = max(out["predictors"], key=lambda p: _or_minus_inf(out["predictors"][p]["within_target"].get("spearman",
                                                                                                  float("nan"))))
    out["best_predictor"] = best  # by the within-target Spearman: the question a user asks is "for my target"
    return out


def _or_minus_inf(value: float) -> float:
    return value if value == value else -float("inf")


def sweep_compute(pairwise_dir: Path, seeds: list[int]) -> dict[str, Any]:
    """Training examples and wall seconds of a pairwise sweep's cells (baselines and pairs of `seeds`),
    from their results.json; where a cell predates `train_examples` there, steps × batch size."""
    cells = [run for run in SweepDir(pairwise_dir).cell_runs(PAIRWISE.cells)
             if int(run.path.name.split("-", 1)[1]) in seeds]
    examples, seconds, estimated = 0, 0.0, 0
    for cell in cells:
        results = cell.results()
        if "train_examples" in results:
            examples += int(results["train_examples"])
        else:
            config = cell.config()
            examples += int(results["steps"]) * int(config.get("batch_size", 32))
            estimated += 1
        seconds += float(results.get("wall_seconds", 0.0))
    return {"cells": len(cells), "train_examples": examples, "wall_seconds": seconds, "cells_estimated": estimated}


def affinity_compute(affinity: dict[str, Any]) -> dict[str, Any]:
    """The affinity run's compute, with its examples in training units: a measurement example run
    forward and backward counts 1, one run forward only counts 1/3."""
    compute = dict(affinity["compute"])
    compute["train_equivalent_examples"] = (compute["train_examples"] + compute["measure_backward_examples"]
                                            + compute["measure_forward_examples"] / 3)
    return compute


def report_comparison(pairwise_dir: Path | str, affinity_dir: Path | str) -> str:
    """The comparison as text; also writes comparison.json and comparison.png into `affinity_dir`."""
    from mtbio.reporting.plots import plot_prediction_scatter

    pairwise_dir, affinity_dir = Path(pairwise_dir), Path(affinity_dir)
    relations = read_json(pairwise_dir, PAIRWISE.summary)
    affinity = read_json(affinity_dir, AFFINITY.summary)
    result = compare_prediction(relations, affinity)
    measured_side = sweep_compute(pairwise_dir, [int(s) for s in relations["seeds"]])
    predicted_side = affinity_compute(affinity)
    result["compute"] = {"pairwise": measured_side, "affinity": predicted_side,
                         "fraction_wall_seconds": _ratio(predicted_side["wall_seconds"], measured_side["wall_seconds"]),
                         "fraction_examples": _ratio(predicted_side["train_equivalent_examples"],
                                                     measured_side["train_examples"])}
    result["pairwise_dir"], result["affinity_dir"] = str(pairwise_dir), str(affinity_dir)
    write_json(affinity_dir / "comparison.json", result)
    panels = []
    for predictor, entry in result["predictors"].items():
        panels.append((predictor, [p["predicted"] for p in entry["points"]], [p["measured"] for p in entry["points"]],
                       f"{predictor}: Spearman {entry['spearman']:+.2f}, Kendall {entry['kendall']:+.2f}"))
    plot_prediction_scatter(panels, affinity_dir / "comparison.png", f"measured mean Δ ({relations['split']})")
    return _comparison_text(result, relations, affinity)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _comparison_text(result: dict[str, Any], relations: dict[str, Any], affinity: dict[str, Any]) -> str:
    lines = [f"Predicted ({result['affinity_dir']}, {len(affinity['seeds'])} seed(s)) against measured "
             f"({result['pairwise_dir']}, mean Δ on {relations['split']}, {len(relations['seeds'])} seed(s))", ""]
    ceiling = result["within_target_ceiling"]
    if ceiling["ceiling"] is not None:
        lines.append(f"measured within-target rankings: seed-pair Spearman r1 {ceiling['r1']:+.2f}, reliability of the "
                     f"{ceiling['seeds']}-seed mean {ceiling['reliability']:+.2f}, noise ceiling {ceiling['ceiling']:.2f}"
                     + ("" if ceiling["ceiling"] > 0 else " (the measured rankings do not repeat across seeds: no "
                        "predictor can be judged against them)"))
    for predictor, entry in result["predictors"].items():
        ci, within = entry["interval"], entry["within_target"]
        if within["targets"]:
            wi = within["spearman_interval"]
            exact = "exact" if within["permutation_exact"] else "sampled"
            share = "" if within["fraction_of_ceiling"] is None else f", {within['fraction_of_ceiling']:+.2f} of the ceiling"
            lines.append(f"{predictor} within target ({within['targets']} targets"
                         f"{'; symmetric: cannot tell s→t from t→s' if within['symmetric'] else ''}): Spearman "
                         f"{within['spearman']:+.3f} [{wi[0]:+.3f}, {wi[1]:+.3f}] (bootstrap over targets), "
                         f"two-sided permutation p {within['permutation_p']:.3f} ({exact}){share}; top-1 {within['top1']:.2f} "
                         f"(chance {within['chance_top1']:.2f}), NDCG@1 {within['ndcg@1']:.2f}, regret@1 "
                         f"{within['regret@1']:+.4f}")
        lines.append(f"  pooled over {entry['pairs']} ordered pairs: Spearman {entry['spearman']:+.3f} "
                     f"[{ci['spearman'][0]:+.3f}, {ci['spearman'][1]:+.3f}], Kendall {entry['kendall']:+.3f} "
                     f"[{ci['kendall'][0]:+.3f}, {ci['kendall'][1]:+.3f}] (95% bootstrap over pairs; rewards knowing "
                     "which target suffers)")
        for k in entry["top_k"]:
            if k["targets"]:
                lines.append(f"  top-{k['k']} partners over {k['targets']} targets: precision {k['precision']:.2f} "
                             f"(random {k['chance']:.2f}), measured Δ > 0 in {k['helpful']:.2f}")
    lines.append(f"best predictor by within-target Spearman: {result['best_predictor']}")
    agreement = {name: entry.get("seed_agreement") for name, entry in result["predictors"].items()}
    agreement["measured Δ"] = result.get("measured_seed_agreement")
    known = [f"{name} {value:+.2f}" for name, value in agreement.items() if value is not None]
    if known:
        lines.append("seed agreement (mean Spearman between two seeds' rankings of the pairs; the measured one bounds "
                     "any prediction): " + ", ".join(known))
    if min(entry["pairs"] for entry in result["predictors"].values()) < 10:
        lines.append("(fewer than 10 pairs: these correlations say little)")
    compute = result["compute"]
    measured, predicted = compute["pairwise"], compute["affinity"]
    note = f", {measured['cells_estimated']} cell(s) as steps × batch size" if measured["cells_estimated"] else ""
    lines += ["", f"compute: pairwise {measured['cells']} cells, {measured['train_examples']:,} training examples"
              f"{note}, {measured['wall_seconds']:,.0f} s",
              f"         affinity {len(affinity['seeds'])} run(s), {predicted['train_examples']:,} training + "
              f"{predicted['measure_backward_examples']:,} forward-backward + {predicted['measure_forward_examples']:,} "
              f"forward-only measurement examples ({predicted['train_equivalent_examples']:,.0f} in training units), "
              f"{predicted['wall_seconds']:,.0f} s ({predicted['measure_seconds']:,.0f} s measuring)"]
    fractions = [f"{name} {compute[key]:.3f}" for name, key in (("wall time", "fraction_wall_seconds"),
                                                                  ("examples", "fraction_examples"))
                 if compute[key] is not None]
    lines.append("         affinity / pairwise: " + (", ".join(fractions) or "-"))
    return "\n".join(lines)


def report_affinity(directory: Path | str) -> str:
    """The predicted matrices of an affinity directory as text, naming each target's most promising source."""
    affinity = read_json(Path(directory), AFFINITY.summary)
    tasks = affinity["tasks"]
    parts = []
    for predictor, entry in affinity["predictors"].items():
        edges = {(e["target"], e["source"]): e for e in entry["edges"]}
        width = max(len(t) for t in tasks + ["target"])
        header = "target".ljust(width) + "".join(f"  {s:>10.10s}" for s in tasks)
        rows = [t.ljust(width) + "".join(f"  {edges[(t, s)]['score']:+10.3g}" if s != t else f"  {'·':>10s}"
                                         for s in tasks) for t in tasks]
        best = [f"  {t}: {max((s for s in tasks if s != t), key=lambda s: edges[(t, s)]['score'])}" for t in tasks]
        parts.append("\n".join([f"{entry['caption']} (row target, column source; {len(affinity['seeds'])} seed(s))"
                                + (", the default" if predictor == affinity["default_predictor"] else ""),
                                header, *rows, "most promising source:", *best]))
    return "\n\n".join(parts)
