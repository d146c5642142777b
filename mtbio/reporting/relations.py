"""Task relations from sweeps: per-seed gains, the verdict rule, and the files a sweep writes.

Pairwise MTL (seed 004 section 4.4.1, Figure 2): the gain of target t from partner s is
Δ = score(t | trained together with s) − score(t | trained alone), computed per seed (both runs
use the same seed) on the dev split with t's primary metric (sign flipped for mse, so a positive
Δ is always better). STILT (seeds 000/003): the same Δ for t fine-tuned from an encoder first
trained on an intermediate task.

The verdict on each edge is `mtbio.reporting.verdicts.judge`'s.
"""
from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path
from typing import Any, Mapping

from mtbio.fileio import open_for_write, write_json, write_text
from mtbio.evaluation.trivial import near_trivial, trivial_relation
from mtbio.reporting.verdicts import (UNDECIDED, Rule, Scores, colour, compare, correct, direction, helps, summary,
                                      verdict_text)
from mtbio.run_dir import SweepDir, register_study

PAIRWISE = register_study("pairwise", "relations.json", ("baselines", "pairs"))  # a task-relation graph
STILT = register_study("stilt", "stilt.json", ("baselines", "transfer"))  # intermediate → target transfer



def withhold_unlearned(cell: dict[str, Any], target: str, metric: str, alone: Scores, together: Scores,
                       trivial: float | None) -> None:
    """Give `cell` no verdict (its `withheld` reason) when its target was learned neither alone nor with
    the partner (both means within a point of the trivial score), so Δ compares two untrained heads. A
    target learned only with its partner is the effect pairwise training looks for: that is judged."""
    if trivial is None or not alone or not together:
        return
    means = [statistics.fmean(alone.values()), statistics.fmean(together.values())]
    if all(near_trivial(m, trivial, metric) for m in means):
        cell["withheld"] = (f"{target}: not learned alone ({means[0]:.4f}, {trivial_relation(means[0], trivial, metric)}"
                            f") nor with the partner ({means[1]:.4f}, {trivial_relation(means[1], trivial, metric)}): "
                            f"trivial score {trivial:.4f}")


def unlearned_tasks(relations: dict[str, Any]) -> list[str]:
    """The tasks whose baseline mean is within a point of their trivial score (not learned alone)."""
    return [n["task"] for n in relations["nodes"] if n.get("trivial") is not None
            and near_trivial(n["baseline"]["mean"], n["trivial"], n["metric"])]


# ---- pairwise ------------------------------------------------------------------------------------
def build_relations(metrics: Mapping[str, str], baseline: Mapping[str, Scores],
                    together: Mapping[tuple[str, str], Scores], rule: Rule = Rule(), split: str = "dev",
                    test: tuple[Mapping[str, Scores], Mapping[tuple[str, str], Scores]] | None = None,
                    trivial: Mapping[str, float] | None = None) -> dict[str, Any]:
    """relations.json: nodes (task, metric, baseline, trivial score) and one edge per ordered pair
    (source → target), the family its p values were corrected over, and the graph's reliability.

    `together[(s, t)]` holds t's score when trained with s. With `test`, every node and edge also
    gets its test-split numbers (the verdict stays the dev one). An edge into a target learned neither
    alone nor with the partner (both within a point of its `trivial` score) gets no verdict.
    """
    tasks = list(metrics)
    nodes = []
    for task in tasks:
        node = {"task": task, "metric": metrics[task], "baseline": summary(baseline[task]),
                "trivial": (trivial or {}).get(task)}
        if test:
            node["test_baseline"] = summary(test[0][task])
        nodes.append(node)
    edges = []
    for target in tasks:
        for source in tasks:
            if source == target or (source, target) not in together:
                continue
            edge = {"source": source, "target": target,
                    **compare(together[(source, target)], baseline[target], metrics[target])}
            withhold_unlearned(edge, target, metrics[target], baseline[target], together[(source, target)],
                               (trivial or {}).get(target))
            if test:
                test_edge = compare(test[1][(source, target)], test[0][target], metrics[target])
                edge["test"] = {k: test_edge[k] for k in ("delta", "sd", "per_seed")}
            edges.append(edge)
    family = correct({f"{e['source']}->{e['target']}": e for e in edges}, rule)
    seeds = sorted({int(s) for n in nodes for s in n["baseline"]["per_seed"]})
    return {"kind": "pairwise", "split": split, "seeds": seeds, **rule.fields(), "family": family,
            "reliability": reliability(edges), "nodes": nodes, "edges": edges}



def _rank_reliability(rows: list[list[float]]) -> dict[str, Any]:
    """rows: one list of edge values per seed (same edge order)."""
    from itertools import combinations as pairs_of
    from statistics import fmean

    from scipy.stats import spearmanr

    k = len(rows)
    r1 = fmean(float(spearmanr(a, b).statistic) for a, b in pairs_of(rows, 2))
    halves = [(list(h), [i for i in range(k) if i not in h]) for h in pairs_of(range(k), k // 2)]
    mean_of = lambda idx: [fmean(rows[i][e] for i in idx) for e in range(len(rows[0]))]  # noqa: E731
    half = fmean(float(spearmanr(mean_of(a), mean_of(b)).statistic) for a, b in halves)
    full = k * r1 / (1 + (k - 1) * r1)
    return {"seed_pair_spearman": r1, "split_half": half, "split_half_corrected": 2 * half / (1 + half),
            "spearman_brown": full, "noise_ceiling": max(full, 0.0) ** 0.5}


def reliability(edges: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How well the edge ranking repeats across seeds, over the seeds every edge has: the mean
    seed-pair Spearman r₁, the split-half Spearman (mean over splits, and Spearman–Brown corrected),
    the reliability of the K-seed mean K·r₁/(1+(K−1)·r₁) and its square root, the noise ceiling of
    any predictor of the graph; `within_target` repeats it with each seed's Δ centred per target."""
    seeds = sorted(set.intersection(*(set(e["per_seed"]) for e in edges)), key=int) if edges else []
    if len(seeds) < 2 or len(edges) < 3:
        return None
    rows = [[e["per_seed"][s]["delta"] for e in edges] for s in seeds]
    centred = []
    for row in rows:
        by_target: dict[str, list[float]] = {}
        for edge, value in zip(edges, row):
            by_target.setdefault(edge["target"], []).append(value)
        centred.append([v - sum(by_target[e["target"]]) / len(by_target[e["target"]]) for e, v in zip(edges, row)])
    return {"seeds": [int(s) for s in seeds], **_rank_reliability(rows), "within_target": _rank_reliability(centred)}


def undecided_cells(relations: dict[str, Any], max_seeds: int) -> list[tuple[str, tuple[str, ...], int]]:
    """The next adaptive round: for each undecided edge with fewer than `max_seeds` seeds, its
    target's baseline and its pair at the edge's next seed, as (kind, tasks, seed), each cell once."""
    out: list[tuple[str, tuple[str, ...], int]] = []
    for edge in relations["edges"]:
        if edge["state"] != UNDECIDED or edge["n_seeds"] >= max_seeds:
            continue
        seed = max(int(s) for s in edge["per_seed"]) + 1
        pair = tuple(sorted((edge["source"], edge["target"])))
        for cell in (("baseline", (edge["target"],), seed), ("pair", pair, seed)):
            if cell not in out:
                out.append(cell)
    return out


def gain_matrix(relations: dict[str, Any]) -> tuple[list[str], list[list[float | None]]]:
    """Rows = target, columns = partner, cells = mean Δ (None on the diagonal or where missing)."""
    tasks = [n["task"] for n in relations["nodes"]]
    by_pair = {(e["target"], e["source"]): e["delta"] for e in relations["edges"]}
    return tasks, [[by_pair.get((t, s)) for s in tasks] for t in tasks]


def write_relations(sweep_dir: Path, relations: dict[str, Any]) -> list[Path]:
    """relations.json, .dot, .graphml, gain_matrix.csv and the two PNGs; returns the paths."""
    from mtbio.reporting.plots import plot_gain_matrix, plot_relation_graph

    paths = [sweep_dir / n for n in (PAIRWISE.summary, "relations.dot", "relations.graphml", "gain_matrix.csv",
                                     "relations.png", "gain_matrix.png")]
    write_json(paths[0], relations)
    write_text(paths[1], relations_dot(relations))
    write_graphml(relations, paths[2])
    tasks, matrix = gain_matrix(relations)
    write_matrix_csv(paths[3], "target \\ partner", tasks, tasks, matrix)
    plot_relation_graph(relations, paths[4], unlearned=unlearned_tasks(relations))
    plot_gain_matrix(relations, tasks, matrix, paths[5])
    return paths


def relations_dot(relations: dict[str, Any], title: str | None = None, number: str = "{:+.3f}") -> str:
    """Graphviz: one node per task (with its baseline), coloured edges labelled with Δ (`number`
    formats the edge value; `title` replaces the pairwise caption)."""
    title = title or (f'pairwise MTL, {relations["split"]}, {len(relations["seeds"])} seed(s): green higher, red '
                      'lower, grey no direction decided')
    lines = ["digraph relations {", f'  label="{title}";', "  node [shape=ellipse, fontname=Helvetica];",
             "  edge [fontname=Helvetica, fontsize=10];"]
    for node in relations["nodes"]:
        lines.append(f'  "{node["task"]}" [label="{node["task"]}\\n{node["metric"]} {node["baseline"]["mean"]:.3f}"];')
    for edge in relations["edges"]:
        style = "solid" if direction(edge) else "dashed"
        lines.append(f'  "{edge["source"]}" -> "{edge["target"]}" [color="{colour(edge)}", '
                     f'fontcolor="{colour(edge)}", style={style}, label="{number.format(edge["delta"])}", '
                     f'verdict="{edge["verdict"]}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graphml(relations: dict[str, Any], path: Path) -> None:
    import networkx as nx

    graph = nx.DiGraph(kind=relations.get("kind", "pairwise"), split=relations["split"], rule=relations["rule"])
    for node in relations["nodes"]:
        attrs = {"metric": node["metric"], "baseline": node["baseline"]["mean"]}
        if node["baseline"]["sd"] is not None:
            attrs["baseline_sd"] = node["baseline"]["sd"]
        graph.add_node(node["task"], **attrs)
    for edge in relations["edges"]:
        attrs = {"delta": edge["delta"], "verdict": edge["verdict"], "color": colour(edge),
                 "n_seeds": edge["n_seeds"],
                 "per_seed_delta": " ".join(f"{s}:{v['delta']:.6f}" for s, v in edge["per_seed"].items())}
        attrs.update({k: edge[k] for k in ("sd", "p_value") if edge[k] is not None})
        graph.add_edge(edge["source"], edge["target"], **attrs)
    write_text(path, "\n".join(nx.generate_graphml(graph)) + "\n")


def write_matrix_csv(path: Path, corner: str, rows: list[str], columns: list[str],
                      matrix: list[list[float | None]]) -> None:
    with open_for_write(path, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([corner, *columns])
        for row, values in zip(rows, matrix):
            writer.writerow([row, *("" if v is None else f"{v:.6f}" for v in values)])


# ---- STILT ---------------------------------------------------------------------------------------
def build_stilt(metrics: Mapping[str, str], intermediates: list[str], baseline: Mapping[str, Scores],
                transferred: Mapping[tuple[str, str], Scores], rule: Rule = Rule(),
                split: str = "dev", trivial: Mapping[str, float] | None = None) -> dict[str, Any]:
    """stilt.json: per target its baseline and, per intermediate task, the transferred score and Δ.

    `transferred[(i, t)]` holds t's score after training on i first. A cell whose target was learned
    neither alone nor after the intermediate task (both within a point of its `trivial` score) gets no verdict.
    """
    rows = []
    for target in metrics:
        cells = {}
        for inter in intermediates:
            if (inter, target) in transferred:
                cells[inter] = compare(transferred[(inter, target)], baseline[target], metrics[target])
                withhold_unlearned(cells[inter], target, metrics[target], baseline[target],
                                   transferred[(inter, target)], (trivial or {}).get(target))
        rows.append({"target": target, "metric": metrics[target], "baseline": summary(baseline[target]),
                     "intermediate": cells})
    family = correct({f"{i}->{r['target']}": c for r in rows for i, c in r["intermediate"].items()}, rule)
    edges = [{"source": i, "target": r["target"], **c} for r in rows for i, c in r["intermediate"].items()]
    seeds = sorted({int(s) for r in rows for s in r["baseline"]["per_seed"]})
    return {"kind": "stilt", "split": split, "seeds": seeds, **rule.fields(), "family": family, "reliability": reliability(edges), "intermediates": intermediates, "targets": rows}


def stilt_matrix(stilt: dict[str, Any]) -> tuple[list[str], list[str], list[list[float | None]]]:
    """Seed 000's layout: rows = target, columns = baseline then each intermediate; mean scores."""
    columns = ["baseline", *stilt["intermediates"]]
    rows, matrix = [], []
    for row in stilt["targets"]:
        rows.append(row["target"])
        cells = row["intermediate"]
        matrix.append([row["baseline"]["mean"], *(cells[i]["score"]["mean"] if i in cells else None
                                                  for i in stilt["intermediates"])])
    return rows, columns, matrix


def write_stilt(sweep_dir: Path, stilt: dict[str, Any]) -> list[Path]:
    """stilt.json, stilt_matrix.csv and stilt_matrix.png; returns the paths."""
    from mtbio.reporting.plots import plot_stilt_matrix

    paths = [sweep_dir / n for n in (STILT.summary, "stilt_matrix.csv", "stilt_matrix.png")]
    write_json(paths[0], stilt)
    rows, columns, matrix = stilt_matrix(stilt)
    write_matrix_csv(paths[1], "target \\ intermediate", rows, columns, matrix)
    plot_stilt_matrix(stilt, paths[2])
    return paths


# ---- `mtbio report` on a sweep directory -----------------------------------------------------------
MARK = {1: "+", -1: "-", 0: " "}  # by the direction a verdict claims


def _pm(mean: float, sd: float | None, signed: bool = False) -> str:
    text = f"{mean:+.4f}" if signed else f"{mean:.4f}"
    return text + (f"±{sd:.4f}" if sd is not None else "")


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in [header, *rows]]
    return "\n".join(lines)


def report_relations(run_dir: Path | str, only: str | None = None) -> str:
    """The gain matrix (pairwise) and/or the STILT matrix of a sweep directory, as text tables,
    naming the most helpful partner (or intermediate task) of each target. `only`: "pairwise"
    or "stilt" to leave the other out."""
    from mtbio.errors import MtbioError

    run_dir = Path(run_dir)
    parts = []
    sweep = SweepDir(run_dir)
    if PAIRWISE.found_in(sweep.path) and only in (None, "pairwise"):
        parts.append(_report_pairwise(json.loads(sweep.summary_file(PAIRWISE).read_text())))
    if STILT.found_in(sweep.path) and only in (None, "stilt"):
        parts.append(_report_stilt(json.loads(sweep.summary_file(STILT).read_text())))
    if not parts:
        raise MtbioError(f"{run_dir}: no relations.json or stilt.json (not a pairwise or stilt sweep directory)")
    return "\n\n".join(parts)


def format_study(data: dict[str, Any]) -> str:
    """A pairwise graph's or a STILT matrix's report from its summary file's content."""
    return _report_stilt(data) if data.get("kind") == "stilt" else _report_pairwise(data)


def _best(options: list[tuple[str, dict[str, Any]]]) -> str:
    if not options:
        return "no partner"
    name, cell = max(options, key=lambda item: item[1]["delta"])
    return (f"{name} ({_pm(cell['delta'], cell['sd'], signed=True)}, {cell['verdict']})" if helps(cell)
            else f"none helps (best: {name} {cell['delta']:+.4f}, {verdict_text(cell)})")


def _legend(data: dict[str, Any]) -> str:
    threshold = "each metric's own" if data.get("min_delta") is None else f"{data['min_delta']:g}"
    return (f"{data['split']} split, seeds {', '.join(map(str, data['seeds']))}; '+' higher, '-' lower, unmarked "
            f"no direction decided (rule {data.get('decision_rule', {}).get('version', 'v1')}, alpha "
            f"{data['alpha']:g}, min delta {threshold})")


def describe_reliability(data: dict[str, Any]) -> str:
    """One line on how well the graph's edge ranking repeats across seeds (empty without figures)."""
    figures = data.get("reliability")
    if not figures:
        return ""
    within = figures["within_target"]
    return (f"reliability over seeds {', '.join(map(str, figures['seeds']))}: mean seed-pair Spearman "
            f"{figures['seed_pair_spearman']:+.2f}, split-half {figures['split_half']:+.2f}, Spearman–Brown "
            f"{figures['spearman_brown']:+.2f}, noise ceiling {figures['noise_ceiling']:.2f}; within target "
            f"{within['seed_pair_spearman']:+.2f} / {within['spearman_brown']:+.2f} / ceiling "
            f"{within['noise_ceiling']:.2f}")


def _evidence_lines(named: list[tuple[str, dict[str, Any]]], family: dict[str, Any] | None) -> list[str]:
    """Per edge: seeds, Δ with the interval its state was read from, two-sided p and adjusted p, verdict, state."""
    lines = [f"family: {family['correction']} over {family['m']} tests" if family else "family: not corrected"]
    if family and family.get("primary"):
        lines[0] = f"primary: {family['primary']}, judged alone at alpha; secondary {lines[0]}"
    for name, cell in named:
        ci = cell.get("ci")
        level = f" {cell.get('ci_level', 0.95) * 100:.4g}%" if ci else ""
        interval = f"{level} [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""
        p = "" if cell["p_value"] is None else f", p (two-sided) {cell['p_value']:.3f}"
        adjusted = "" if cell.get("p_adjusted") is None else f", adj. p {cell['p_adjusted']:.3f}"
        lines.append(f"  {name}: {cell['n_seeds']} seeds, Δ {cell['delta']:+.4f}{interval}{p}{adjusted}, "
                     f"{verdict_text(cell)}, {cell.get('state', '?')}")
    return lines


def withheld_note(cells: list[dict[str, Any]]) -> str:
    """One line saying why edges were left uncoloured (empty when none was)."""
    reasons = sorted({c["withheld"] for c in cells if c.get("withheld")})
    if not reasons:
        return ""
    return (f"{sum(1 for c in cells if c.get('withheld'))} of {len(cells)} edges get no verdict (grey): "
            + "; ".join(reasons))


def _report_pairwise(relations: dict[str, Any]) -> str:
    tasks = [n["task"] for n in relations["nodes"]]
    edges = {(e["target"], e["source"]): e for e in relations["edges"]}
    rows = []
    for node in relations["nodes"]:
        target = node["task"]
        cells = [(f"{edges[(target, s)]['delta']:+.4f}{MARK[direction(edges[(target, s)])]}"
                  if (target, s) in edges else "·") for s in tasks]
        rows.append([target, _pm(node["baseline"]["mean"], node["baseline"]["sd"]), *cells])
    unlearned = unlearned_tasks(relations)
    lines = ["Pairwise MTL gain matrix: Δ of the target (row) when trained together with the partner (column)",
             _legend(relations), withheld_note(relations["edges"]),
             *([f"not learned alone: " + "; ".join(
                 f"{n['task']} ({trivial_relation(n['baseline']['mean'], n['trivial'], n['metric'])})"
                 for n in relations["nodes"] if n["task"] in unlearned)] if unlearned else []), "", _table(["target", "alone", *tasks], rows), "", "most helpful partner:"]
    for target in tasks:
        lines.append(f"  {target}: {_best([(s, edges[(target, s)]) for s in tasks if (target, s) in edges])}")
    lines += ["", *_evidence_lines([(f"{e['source']} → {e['target']}", e) for e in relations["edges"]],
                                   relations.get("family")), describe_reliability(relations)]
    return "\n".join(lines).rstrip()


def _report_stilt(stilt: dict[str, Any]) -> str:
    inters = stilt["intermediates"]
    rows = []
    for row in stilt["targets"]:
        cells = row["intermediate"]
        rows.append([row["target"], _pm(row["baseline"]["mean"], row["baseline"]["sd"]),
                     *(f"{cells[i]['score']['mean']:.4f} ({cells[i]['delta']:+.4f}){MARK[direction(cells[i])]}"
                       if i in cells else "·" for i in inters)])
    cells = [c for r in stilt["targets"] for c in r["intermediate"].values()]
    lines = ["STILT: target (row) fine-tuned after the intermediate task (column); score (Δ vs baseline)",
             _legend(stilt), withheld_note(cells), "", _table(["target", "baseline", *inters], rows), "",
             "most helpful intermediate task:"]
    for row in stilt["targets"]:
        lines.append(f"  {row['target']}: {_best(list(row['intermediate'].items()))}")
    lines += ["", *_evidence_lines([(f"{i} → {r['target']}", c) for r in stilt["targets"]
                                    for i, c in r["intermediate"].items()], stilt.get("family")),
              describe_reliability(stilt)]
    return "\n".join(lines).rstrip()
