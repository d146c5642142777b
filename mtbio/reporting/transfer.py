"""The transfer table: a target fine-tuned at several training sizes from the plain encoder and from
encoders refined on other tasks (MT-DNN's domain-adaptation experiment, seed 004's refine-then-fine-tune
claim checked on tasks outside the refinement set).

Per target, size and refinement set: Δ = score(from the refined encoder) − score(from the plain one),
per seed (both cells share the seed and the training subset), judged by the shared rule
(`mtbio.reporting.verdicts`) with the p values corrected across every (target, size, set) of the table.
Each target row carries its trivial score and, where measured, the no-training baselines of each
starting encoder (`mtbio.model.probes`): a fine-tuned mean below one of them is marked.

`average` answers "is this start at least as good over the held-out targets?": per start and seed, the mean
over every (target, size) point of the signed score (higher is better), every pair of starts compared paired
over seeds, with its own correction over those pairs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from mtbio.evaluation.metrics import metric_sign
from mtbio.evaluation.trivial import near_trivial, trivial_relation
from mtbio.fileio import write_json
from mtbio.reporting.verdicts import Rule, Scores, compare, correct, summary, t_interval, verdict_text
from mtbio.run_dir import register_study

TRANSFER = register_study("transfer", "transfer.json", ("targets",))  # refinement and unseen targets

PLAIN = "plain"


def build_transfer(metrics: Mapping[str, str], sets: Mapping[str, list[str]], sizes: Mapping[str, Mapping[str, int]],
                   plain: Mapping[tuple[str, str], Scores], refined: Mapping[tuple[str, str, str], Scores],
                   rule: Rule = Rule(), trivial: Mapping[str, float] | None = None,
                   no_training: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]] | None = None
                   ) -> dict[str, Any]:
    """transfer.json. `plain[(target, size)]` and `refined[(set, target, size)]` hold per-seed dev scores;
    `sizes[target]` maps a size's label ("200", "all") to the examples the target trained on;
    `no_training[target][start][str(examples)]` holds the no-training baselines (name → score) of a starting
    encoder (`plain` or a set's name) fitted on that many examples."""
    rows, family = [], {}
    for target, metric in metrics.items():
        baselines = (no_training or {}).get(target, {})
        points = []
        for label, examples in sizes[target].items():
            alone = plain.get((target, label), {})
            if not alone:
                continue
            point: dict[str, Any] = {"size": label, "examples": examples, PLAIN: _scores(alone), "from": {},
                                     "no_training": {start: dict(found.get(str(examples), {}))
                                                     for start, found in baselines.items()}}
            for name in sets:
                scores = refined.get((name, target, label), {})
                if scores and target not in sets[name]:
                    cell = compare(scores, alone, metric)
                    cell["score"]["interval"] = _interval(list(scores.values()))
                    point["from"][name] = family[f"{name}->{target}@{label}"] = cell
            points.append(point)
        rows.append({"target": target, "metric": metric, "trivial": (trivial or {}).get(target), "points": points})
    described = correct(family, rule)
    for row in rows:
        for point in row["points"]:
            starts = [(PLAIN, point[PLAIN]["mean"])] + [(n, c["score"]["mean"]) for n, c in point["from"].items()]
            marks = {start: _below(mean, row, point["no_training"].get(start) or {}) for start, mean in starts}
            point["below"] = {start: why for start, why in marks.items() if why}
    seeds = sorted({int(s) for row in rows for p in row["points"] for s in p[PLAIN]["per_seed"]})
    return {"kind": "transfer", "split": "dev", "seeds": seeds, **rule.fields(), "family": described,
            "refinement_sets": {k: list(v) for k, v in sets.items()}, "targets": rows,
            "average": average_starts(rows, list(sets), rule)}


def average_starts(rows: list[dict[str, Any]], sets: list[str], rule: Rule) -> dict[str, Any]:
    """Per start, the per-seed mean over the (target, size) points every start has on that seed, then every
    pair of starts compared (the later one against the earlier), corrected over the pairs."""
    starts = [PLAIN, *sets]
    signed: dict[str, dict[int, list[float]]] = {start: {} for start in starts}
    for row in rows:
        sign = metric_sign(row["metric"])
        for point in row["points"]:
            found = {PLAIN: point[PLAIN]["per_seed"],
                     **{name: {s: v["with"] for s, v in cell["per_seed"].items()} for name, cell in point["from"].items()}}
            for seed in set.intersection(*(set(found.get(start, {})) for start in starts)):
                for start in starts:
                    signed[start].setdefault(int(seed), []).append(sign * found[start][seed])
    means = {start: {seed: sum(v) / len(v) for seed, v in per_seed.items()} for start, per_seed in signed.items()}
    points = {len(v) for per_seed in signed.values() for v in per_seed.values()}
    pairs = {f"{b} vs {a}": compare(means[b], means[a])
             for i, a in enumerate(starts) for b in starts[i + 1:] if means[a] and means[b]}
    return {"points_per_seed": sorted(points), "starts": {start: summary(m) for start, m in means.items() if m},
            "pairs": pairs, "family": correct(pairs, rule) if pairs else None}


def _scores(scores: Scores) -> dict[str, Any]:
    return {**summary(scores), "interval": _interval(list(scores.values()))}


def _interval(values: list[float]) -> list[float] | None:
    found = t_interval(values)
    return None if found is None else [found[0], found[1]]


def _below(mean: float, row: dict[str, Any], baselines: Mapping[str, float]) -> str | None:
    """What a fine-tuned mean does not clear: its trivial score (within a point), or a no-training baseline of
    the encoder it started from (better than it by the metric's direction)."""
    sign = metric_sign(row["metric"])
    if row["trivial"] is not None and near_trivial(mean, row["trivial"], row["metric"]):
        return f"{trivial_relation(mean, row['trivial'], row['metric'])} ({row['trivial']:.4f})"
    beaten = [f"{name} {value:.4f}" for name, value in baselines.items()
              if value is not None and sign * (value - mean) > 0]
    return f"below the no-training {', '.join(beaten)}" if beaten else None


def write_transfer(sweep_dir: Path, table: dict[str, Any]) -> list[Path]:
    """transfer.json and transfer.png (score against training size, a line per starting encoder)."""
    from mtbio.reporting.plots import plot_transfer_curves

    paths = [sweep_dir / TRANSFER.summary, sweep_dir / "transfer.png"]
    write_json(paths[0], table)
    plot_transfer_curves(table, paths[1])
    return paths


def format_transfer(table: dict[str, Any]) -> str:
    """The table as text: per target and size, each start's mean ± sd, Δ with its interval, adjusted p, verdict."""
    lines = [f"Transfer ({table['split']}, {len(table['seeds'])} seed(s); {table['rule']}; "
             f"{table['family']['correction']} over {table['family']['m']} tests)", ""]
    for name, tasks in table["refinement_sets"].items():
        lines.append(f"refinement set {name}: {', '.join(tasks)}")
    for row in table["targets"]:
        trivial = "–" if row["trivial"] is None else f"{row['trivial']:.4f}"
        lines += ["", f"{row['target']} ({row['metric']}; trivial {trivial})"]
        for point in row["points"]:
            plain = point[PLAIN]
            text = [f"  n={point['size']:>5} ({point['examples']}): plain {_pm(plain)}"]
            for name, cell in point["from"].items():
                ci = cell["ci"]
                interval = f" [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""
                p = "–" if cell["p_adjusted"] is None else f"{cell['p_adjusted']:.3f}"
                text.append(f"from {name} {_pm(cell['score'])}, Δ {cell['delta']:+.4f}{interval}, p_adj {p}: "
                            f"{verdict_text(cell)}")
            lines.append("; ".join(text))
            for start, found in point["no_training"].items():
                shown = ", ".join(f"{k} {v:.4f}" for k, v in found.items() if v is not None)
                lines += [f"    no training, {start} encoder: {shown}"] if shown else []
            lines += [f"    {start}: {why}" for start, why in point["below"].items()]
    average = table.get("average") or {}
    if average.get("starts"):
        lines += ["", f"mean over the points ({', '.join(map(str, average['points_per_seed']))} per seed): " +
                  "; ".join(f"{start} {_pm(s)}" for start, s in average["starts"].items())]
        for name, cell in average["pairs"].items():
            ci = cell["ci"]
            interval = f" [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""
            p = "–" if cell.get("p_adjusted") is None else f"{cell['p_adjusted']:.3f}"
            lines.append(f"  {name}: Δ {cell['delta']:+.4f}{interval}, p_adj {p}: {verdict_text(cell)}")
    return "\n".join(lines)


def _pm(scores: dict[str, Any]) -> str:
    return f"{scores['mean']:.4f}" + (f" ± {scores['sd']:.4f}" if scores.get("sd") is not None else "")
