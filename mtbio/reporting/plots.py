"""PNG figures of sweep results (matplotlib's Agg backend: no display needed).

- `plot_relation_graph`: the pairwise task-relation graph (seed 004 Figure 2): an arrow s → t is
  green when s improves t, red when it hurts t, grey when it has no effect; labels are Δ.
- `plot_gain_matrix`: heatmap of Δ, rows = target, columns = partner.
- `plot_stilt_matrix`: seed 000's STILT table as a heatmap, rows = target, columns = baseline then
  each intermediate task, colour = Δ against the baseline, text = score.
- `plot_transfer_curves`: a target's score against its training size from each starting encoder.
- `plot_training_curves`: one run's per-task training loss and dev score against the step.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from mtbio.fileio import save_figure  # noqa: E402
from mtbio.reporting.verdicts import DECIDED, GREEN, GREY, MIN_SEEDS, RED, colour, direction  # noqa: E402


def plot_relation_graph(relations: dict[str, Any], path: Path, title: str | None = None,
                        number: str = "{:+.3f}", unlearned: Sequence[str] = ()) -> None:
    """Directed graph on a circle; both directions of a pair are drawn as separate arcs. `number`
    formats the edge labels; `title` replaces the pairwise caption; `unlearned` tasks are marked."""
    import networkx as nx

    graph = nx.DiGraph()
    for node in relations["nodes"]:
        graph.add_node(node["task"])
    for edge in relations["edges"]:
        graph.add_edge(edge["source"], edge["target"], **edge)
    n = graph.number_of_nodes()
    pos = nx.circular_layout(graph) if n > 1 else {node: (0.0, 0.0) for node in graph}
    size = max(6.0, 1.6 * math.sqrt(max(n, 1)) + 4)
    fig, ax = plt.subplots(figsize=(size, size))
    labels = {node["task"]: f"{node['task']}\n{node['baseline']['mean']:.3f}"
              + ("\nnot learned" if node["task"] in unlearned else "") for node in relations["nodes"]}
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=3200, node_color="#e3f2fd", edgecolors="#1565c0")
    nx.draw_networkx_labels(graph, pos, labels=labels, ax=ax, font_size=9)
    style = "arc3,rad=0.18"
    for shade in (GREY, RED, GREEN):  # edges with a decided direction drawn last, on top
        edges = [(u, v) for u, v, d in graph.edges(data=True) if colour(d) == shade]
        if not edges:
            continue
        widths = [1.0 if shade == GREY else 1.5 + 40 * min(abs(graph.edges[e]["delta"]), 0.05)
                  for e in edges]
        styles = [("dotted" if graph.edges[e].get("state", DECIDED) != DECIDED else "dashed")
                  if shade == GREY else "solid" for e in edges]
        nx.draw_networkx_edges(graph, pos, edgelist=edges, ax=ax, edge_color=shade, width=widths,
                               style=styles, arrows=True, arrowsize=18,
                               node_size=3200, connectionstyle=style, alpha=0.7 if shade == GREY else 1.0)
        nx.draw_networkx_edge_labels(graph, pos, ax=ax, edge_labels={e: number.format(graph.edges[e]["delta"]) for e in edges},
                                     font_color=shade, font_size=8, connectionstyle=style, label_pos=0.3,
                                     bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    withheld = sum(1 for e in relations["edges"] if e.get("withheld"))
    note = (f"\n{withheld} of {len(relations['edges'])} edges get no verdict (grey): "
            + (f"fewer than {MIN_SEEDS} seeds" if len(relations["seeds"]) < MIN_SEEDS
               else "a target not learned or too few seeds")
            if withheld else "")
    ax.set_title(title or f"Pairwise MTL ({relations['split']}, {len(relations['seeds'])} seed(s)): "
                 "green improves, red hurts\ngrey: dashed no effect, dotted undecided\nnode: baseline score; "
                 "edge s→t: Δ of t trained with s"
                 + note, fontsize=10)
    ax.axis("off")
    ax.margins(0.15)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def _heatmap(path: Path, rows: list[str], columns: list[str], colour: list[list[float | None]],
             text: list[list[str]], title: str, xlabel: str, ylabel: str, min_delta: float,
             colour_label: str = "Δ vs baseline", floor: float = 1e-3) -> None:
    """The colour scale spans at least ±2·min_delta (and ±`floor`), so differences below the effect
    threshold stay pale instead of being stretched to full red or green."""
    import numpy as np

    values = np.array([[math.nan if v is None else v for v in row] for row in colour], dtype=float)
    finite = values[np.isfinite(values)]
    span = max(float(np.abs(finite).max()) if finite.size else 0.0, 2 * min_delta, floor)
    fig, ax = plt.subplots(figsize=(2.0 + 1.5 * len(columns), 1.5 + 0.8 * len(rows)))
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=TwoSlopeNorm(0.0, -span, span), aspect="auto")
    for i, row in enumerate(text):
        for j, cell in enumerate(row):
            ax.text(j, i, cell, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colour_label)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def _digits(values: list[float]) -> int:
    """Decimals enough to tell the distinct values apart (3 to 5)."""
    distinct = sorted(set(values))
    for digits in (3, 4, 5):
        if len({round(v, digits) for v in distinct}) == len(distinct):
            return digits
    return 5


def _cell_text(cell: dict[str, Any], digits: int = 3) -> str:
    """'+0.012 ±0.004' and, for an effect, its verdict on a second line ('no verdict' when withheld)."""
    sd = f" ±{cell['sd']:.{digits}f}" if cell["sd"] is not None else ""
    verdict = ("\nno verdict" if cell.get("withheld") else
               f"\n{cell['verdict']}" if direction(cell) else "")
    return f"{cell['delta']:+.{digits}f}{sd}{verdict}"


def plot_gain_matrix(relations: dict[str, Any], tasks: list[str], matrix: list[list[float | None]], path: Path) -> None:
    """Δ of each target (row) with each partner (column: `gain_matrix`), annotated mean ± sd and verdicts."""
    edges = {(e["target"], e["source"]): e for e in relations["edges"]}
    digits = _digits([e["delta"] for e in relations["edges"]])
    text = [[_cell_text(edges[(t, s)], digits) if (t, s) in edges else "" for s in tasks] for t in tasks]
    _heatmap(path, tasks, tasks, matrix, text,
             f"Pairwise MTL gain ({relations['split']}, {len(relations['seeds'])} seed(s)), colour = Δ",
             "partner (trained together)", "target", relations["min_delta"] or 0.01)


def plot_stilt_matrix(stilt: dict[str, Any], path: Path) -> None:
    """Rows = target, columns = baseline then intermediates; colour Δ, text score (and Δ)."""
    rows, colour, text = [], [], []
    digits = _digits([c["delta"] for row in stilt["targets"] for c in row["intermediate"].values()])
    for row in stilt["targets"]:
        rows.append(row["target"])
        cells = row["intermediate"]
        colour.append([0.0, *(cells[i]["delta"] if i in cells else None for i in stilt["intermediates"])])
        text.append([f"{row['baseline']['mean']:.3f}",
                     *(f"{cells[i]['score']['mean']:.3f}\n{_cell_text(cells[i], digits)}" if i in cells else ""
                       for i in stilt["intermediates"])])
    _heatmap(path, rows, ["baseline", *stilt["intermediates"]], colour, text,
             f"STILT ({stilt['split']}, {len(stilt['seeds'])} seed(s)): score after the intermediate task; "
             "colour = Δ vs baseline", "intermediate task", "target", stilt["min_delta"] or 0.01)


def plot_transfer_curves(table: dict[str, Any], path: Path) -> None:
    """One panel per target: the dev score against the training size (log scale), a line per starting encoder
    with its 95% interval over seeds, the trivial score dashed (MT-DNN's domain-adaptation figure)."""
    rows = table["targets"] or [{"target": "(no targets)", "metric": "", "points": [], "trivial": None}]
    fig, axes = plt.subplots(1, len(rows), figsize=(4.5 * len(rows), 4), squeeze=False)
    for ax, row in zip(axes[0], rows):
        starts = ["plain", *table["refinement_sets"]]
        for start in starts:
            found = [(p["examples"], p["plain"] if start == "plain" else p["from"][start]["score"])
                     for p in row["points"] if start == "plain" or start in p["from"]]
            if not found:
                continue
            xs = [x for x, _ in found]
            ax.plot(xs, [s["mean"] for _, s in found], marker="o", label=start if start == "plain" else f"refined: {start}")
            low = [s["interval"][0] if s.get("interval") else s["mean"] for _, s in found]
            high = [s["interval"][1] if s.get("interval") else s["mean"] for _, s in found]
            ax.fill_between(xs, low, high, alpha=0.15)
        if row.get("trivial") is not None:
            ax.axhline(row["trivial"], color="#9e9e9e", linestyle="--", linewidth=0.8, label="trivial")
        if len({p["examples"] for p in row["points"]}) > 1:
            ax.set_xscale("log")
        ax.set(xlabel="training examples", ylabel=f"dev {row['metric']}", title=row["target"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Fine-tuning from the plain and the refined encoders ({len(table['seeds'])} seed(s), 95% interval)",
                 fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_training_curves(records: list[dict[str, Any]], primary: dict[str, str], path: Path, title: str,
                         trivial: dict[str, float] | None = None, best_step: int | None = None) -> None:
    """Three panels against the step: each task's training loss (metrics.jsonl "train" lines), each
    task's dev primary score ("dev" lines; `primary` maps task → metric) with its `trivial` score
    dashed and the `best_step` (the weights the run kept) marked, and the learning rate."""
    train = [r for r in records if r.get("split") == "train"]
    dev = [r for r in records if r.get("split") == "dev"]
    fig, (loss_ax, dev_ax, lr_ax) = plt.subplots(1, 3, figsize=(15, 4))
    for task in sorted({t for r in train for t in r["loss"]}):
        points = [(r["step"], r["loss"][task]) for r in train if task in r["loss"]]
        loss_ax.plot(*zip(*points), marker="." if len(points) < 30 else None, label=task)
    loss_ax.set(xlabel="step", ylabel="training loss (mean since the previous point)", title="training loss", yscale="log")
    for task in sorted({t for r in dev for t in r["scores"]}):
        points = [(r["step"], r["scores"][task][primary[task]]) for r in dev
                  if task in r["scores"] and primary.get(task) in r["scores"][task]]
        if points:
            line, = dev_ax.plot(*zip(*points), marker="o", label=f"{task} ({primary[task]})")
            if trivial and task in trivial:
                dev_ax.axhline(trivial[task], color=line.get_color(), linestyle="--", linewidth=1, alpha=0.7,
                               label=f"{task} trivial {trivial[task]:.3f}")
    if best_step is not None and dev:
        dev_ax.axvline(best_step, color="black", linestyle=":", linewidth=1, label=f"kept: step {best_step}")
    dev_ax.set(xlabel="step", ylabel="dev score", title="dev primary metric (dashed: trivial score)")
    rates = [(r["step"], r["lr"]) for r in train if "lr" in r]
    if rates:
        lr_ax.plot(*zip(*rates), color="#555555")
    lr_ax.set(xlabel="step", ylabel="learning rate", title="learning rate (at each logged step)")
    for ax in (loss_ax, dev_ax, lr_ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_score_matrix(path: Path, tasks: list[str], matrix: list[list[float | None]], title: str,
                      colour_label: str) -> None:
    """Heatmap of a predicted score per ordered pair: rows = target, columns = source (as `plot_gain_matrix`)."""
    text = [["" if v is None else f"{v:+.3g}" for v in row] for row in matrix]
    _heatmap(path, tasks, tasks, matrix, text, title, "source (partner)", "target", 0.0, colour_label, floor=1e-12)


def plot_prediction_scatter(panels: list[tuple[str, list[float], list[float], str]], path: Path, ylabel: str) -> None:
    """One panel per predictor: predicted score (x) against the measured value (y) of each ordered
    pair; `panels` holds (predictor, predicted, measured, caption)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
    for ax, (name, predicted, measured, caption) in zip(axes[0], panels):
        ax.scatter(predicted, measured, s=18, alpha=0.8)
        ax.axhline(0.0, color="#9e9e9e", linewidth=0.8)
        ax.set(xlabel=f"predicted: {name}", ylabel=ylabel, title=caption)
        ax.xaxis.set_major_locator(MaxNLocator(5))  # small scores (1e-3) would print overlapping tick labels
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
