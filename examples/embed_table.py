"""The embedding study's tables (examples/embed_study.md), from its transfer sweep's transfer.json.

Per (target, size) point: the trivial score, each start's best no-training baseline (for a pair target also its
zero-shot cosine), the plain encoder's mean ± sd and every refined start's mean with Δ against plain, its interval
and verdict (the secondary family: every point of every start, corrected together, as transfer.json judged them).
Then the declared primary comparison: per start, the per-seed mean over the points of (start − plain), every
start against plain, corrected over the starts alone; withheld until every start has every point on a seed.
Beside it, a sensitivity check (not the declared comparison): each start's mean over the points whose cells all ran
from its committed encoder, where `starts/rerefined.json` lists cells run from a refine redone with another hash.
Last, whether a start qualifies as the checkpoint (primary judged higher, no point judged lower, the pair target's
zero-shot cosine within 2 points of plain's). Scores ×100. Before the sweep has written transfer.json (cells still
to run), an interim table of the landed cells alone: per point and start, the seeds landed, mean ± sd and the mean
per-seed Δ against plain, each cell's own no-training baselines beside it; no interval and no verdict.

    python examples/embed_table.py [examples/embed_study]
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from transfer_table import best_baseline, mean_sd

from mtbio.model.floor import best_baseline as floor_baseline
from mtbio.reporting.verdicts import Rule, compare, correct, verdict_text

HERE = Path(__file__).resolve().parent
PAIR_TARGET = "mqp"
COSINE_KEEP = 0.02  # the checkpoint keeps the pair target's zero-shot cosine within 2 points of plain's


def _interval(cell: dict[str, Any]) -> str:
    ci = cell.get("ci")
    return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "–"


def point_table(result: dict[str, Any]) -> str:
    """One row per (target, size): trivial, baselines, plain, and per start score, Δ [interval], verdict."""
    starts = list(result["refinement_sets"])
    head = ["target", "n", "trivial", "no training: plain", "plain", *[f"{s}: score, Δ [interval], verdict" for s in starts],
            *[f"no training: {s}" for s in starts]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["targets"]:
        trivial = "–" if row.get("trivial") is None else f"{100 * row['trivial']:.1f}"
        for point in row["points"]:
            cells = []
            for start in starts:
                cell = point["from"].get(start)
                cells.append("–" if cell is None else f"{mean_sd(cell['score'])}, {100 * cell['delta']:+.1f} "
                                                      f"{_interval(cell)}, {verdict_text(cell)}")
            baselines = [best_baseline(point["no_training"].get(s) or {}) for s in starts]
            lines.append("| " + " | ".join([row["target"], str(point["examples"]), trivial,
                                            best_baseline(point["no_training"].get("plain") or {}),
                                            mean_sd(point["plain"]),
                                            *cells, *baselines]) + " |")
    return "\n".join(lines)


def primary(result: dict[str, Any], rule: Rule = Rule(),
            leave_out: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """Per start: the per-seed mean over every (target, size) point of the signed Δ against plain, judged against
    plain with the correction over the starts; a start missing a point on a seed has no value on that seed.
    `leave_out`: per start, the points ("target@n") left out of its mean (then `points` is per start)."""
    starts = list(result["refinement_sets"])
    points = [(row, point) for row in result["targets"] for point in row["points"]]
    family: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for start in starts:
        dropped = (leave_out or {}).get(start, set())
        kept = [(row, point) for row, point in points if f"{row['target']}@{point['examples']}" not in dropped]
        expected = counts[start] = len(kept)
        per_seed: dict[str, list[float]] = {}
        for row, point in kept:
            cell = point["from"].get(start)
            for seed, found in (cell or {}).get("per_seed", {}).items():
                per_seed.setdefault(seed, []).append(found["delta"])  # already signed by the metric's direction
        complete = {seed: sum(v) / len(v) for seed, v in per_seed.items() if len(v) == expected}
        if len(complete) >= 2:
            family[start] = compare(complete, {seed: 0.0 for seed in complete})
        else:
            family[start] = {"withheld": f"{len(complete)} seed(s) with all {expected} points", "n_seeds": 0,
                             "p_value": None, "delta": None}
    correct(family, rule)
    return {"points": len(points) if leave_out is None else counts, "starts": family}


def rerefined_points(sweep: Path) -> dict[str, set[str]]:
    """Per start, the points ("target@n") with a cell run from a refine whose encoder hash differs from the start's
    committed one (`starts/rerefined.json`): left out of the sensitivity check of the primary comparison."""
    path = sweep / "starts" / "rerefined.json"
    if not path.is_file():
        return {}
    found = json.loads(path.read_text())["starts"]
    return {start: {"@".join(cell.split("/")[:2]).replace("@n-", "@") for cell in info["cells"]}
            for start, info in found.items() if info["cells"]}


def pair_cosines(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The pair target's zero-shot cosine per start and training size (fitted on that size's subset)."""
    out: dict[str, dict[str, float]] = {}
    for row in result["targets"]:
        if row["target"] != PAIR_TARGET:
            continue
        for point in row["points"]:
            for start, found in point["no_training"].items():
                found = found or {}
                cosine = found.get("cosine-mean", next((v for k, v in found.items() if k.startswith("cosine")), None))
                if cosine is not None:
                    out.setdefault(start, {})[str(point["examples"])] = cosine
    return out


def checkpoint(result: dict[str, Any], judged: dict[str, Any]) -> dict[str, str]:
    """Per start: qualifies, or why not."""
    cosines = pair_cosines(result)
    plain = cosines.get("plain", {})
    out = {}
    for start, cell in judged["starts"].items():
        lower = [f"{row['target']}@{point['examples']}" for row in result["targets"] for point in row["points"]
                 if (point["from"].get(start) or {}).get("verdict") == "hurts"
                 or (point["from"].get(start) or {}).get("direction") == "lower"]
        lost = [n for n, value in cosines.get(start, {}).items() if n in plain and plain[n] - value > COSINE_KEEP]
        reasons = []
        if verdict_text(cell) != "improves" and cell.get("direction") != "higher":
            reasons.append(f"primary {verdict_text(cell)}")
        if lower:
            reasons.append("lower on " + ", ".join(lower))
        if lost:
            reasons.append(f"{PAIR_TARGET} zero-shot cosine more than 2 points below plain at n = {', '.join(lost)}")
        out[start] = "qualifies" if not reasons else "; ".join(reasons)
    return out


def _judged_lines(judged: dict[str, Any]) -> list[str]:
    lines = []
    for start, cell in judged["starts"].items():
        count = judged["points"] if isinstance(judged["points"], int) else judged["points"][start]
        if cell.get("withheld"):
            lines.append(f"- {start} ({count} points): {verdict_text(cell)}")
        else:
            lines.append(f"- {start} ({count} points): Δ {100 * cell['delta']:+.2f} {_interval(cell)}, "
                         f"{verdict_text(cell)}")
    return lines


def render(result: dict[str, Any], leave_out: dict[str, set[str]] | None = None) -> str:
    judged = primary(result)
    lines = [point_table(result), "", f"Primary: mean over the {judged['points']} points of (start − plain), paired by "
             "seed, corrected over the starts:", "", *_judged_lines(judged)]
    if leave_out:
        lines += ["", "Sensitivity (not the declared comparison): the same, each start's mean over the points whose "
                  "cells all ran from its committed encoder (" + "; ".join(
                      f"{start} leaves out {', '.join(sorted(points))}" for start, points in leave_out.items()) + "):",
                  "", *_judged_lines(primary(result, leave_out=leave_out))]
    cosines = pair_cosines(result)
    if cosines:
        lines += ["", f"{PAIR_TARGET} zero-shot cosine (×100) by start and training size: " + "; ".join(
            f"{start} " + ", ".join(f"{100 * v:.1f} at {n}" for n, v in sorted(found.items(), key=lambda x: int(x[0])))
            for start, found in cosines.items())]
    lines += ["", "Checkpoint: " + "; ".join(f"{start}: {why}" for start, why in checkpoint(result, judged).items())]
    return "\n".join(lines)


def interim(sweep: Path) -> str:
    """The landed cells of an unfinished sweep: per (target, size, start), the seeds, mean ± sd, the mean per-seed Δ
    against plain (seeds both have), the mean of the cells' best no-training baseline and, for a pair target, of their
    zero-shot cosine (mean pooling); no verdicts."""
    metrics = json.loads((sweep / "declared.json").read_text())["primary_metric"]
    lines = ["| target | n | start | seeds | dev | Δ vs plain (paired seeds) | no training (best, mean) | "
             "zero-shot cosine | trivial |", "|---|---|---|---|---|---|---|---|---|"]
    for target, metric in metrics.items():
        for size in sorted((sweep / "targets" / target).glob("n-*"), key=lambda p: int(p.name[2:])):
            found: dict[str, dict[str, dict[str, Any]]] = {}
            for done in sorted(size.glob("*/seed-*/results.json")):
                found.setdefault(done.parent.parent.name, {})[done.parent.name] = json.loads(done.read_text())
            plain = {seed: r["dev"][target][metric] for seed, r in found.get("plain", {}).items()}
            for start in sorted(found, key=lambda s: (s != "plain", s)):
                runs = found[start]
                scores = {seed: r["dev"][target][metric] for seed, r in runs.items()}
                spread = {"mean": statistics.fmean(scores.values()),
                          "sd": statistics.stdev(scores.values()) if len(scores) > 1 else None}
                paired = [scores[seed] - plain[seed] for seed in scores if seed in plain]
                delta = f"{100 * statistics.fmean(paired):+.1f} ({len(paired)})" if paired and start != "plain" else "–"
                best = [top[1] for r in runs.values()
                        if (top := floor_baseline((r.get("baselines") or {}).get(target) or {}, metric))]
                base = f"{100 * statistics.fmean(best):.1f}" if best else "–"
                cosines = [r["baselines"][target]["cosine-mean"] for r in runs.values()
                           if ((r.get("baselines") or {}).get(target) or {}).get("cosine-mean") is not None]
                cosine = f"{100 * statistics.fmean(cosines):.1f}" if cosines else "–"
                trivial = next(iter(runs.values())).get("trivial", {}).get(target)
                lines.append(f"| {target} | {size.name[2:]} | {start.removeprefix('from-')} | {len(runs)} | "
                             f"{mean_sd(spread)} | {delta} | {base} | {cosine} | "
                             f"{'–' if trivial is None else f'{100 * trivial:.1f}'} |")
    return "\n".join(["Interim (the sweep has cells to run; no verdicts):", "", *lines])


def main() -> None:
    sweep = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "embed_study"
    summary = sweep / "transfer.json"
    print(render(json.loads(summary.read_text()), rerefined_points(sweep)) if summary.is_file() else interim(sweep))


if __name__ == "__main__":
    main()
