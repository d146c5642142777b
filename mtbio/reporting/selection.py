"""select.json and select.md of `mtbio select`: the predictor's ranking of the candidates, the pairs
that verified it, and the target's dev score trained with the selected partners, alone and with every
candidate, judged by the shared decision rule (`mtbio.reporting.verdicts`, one family per file)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from mtbio.fileio import write_json, write_text
from mtbio.reporting.verdicts import Rule, compare, correct, helps, summary, verdict_text
from mtbio.run_dir import register_study

SELECT = register_study("select", "select.json")  # a target's partners

Scores = Mapping[int, float]  # seed -> the target's dev score


def ranking(affinity: Mapping[str, Any], target: str, candidates: Sequence[str]) -> list[dict[str, Any]]:
    """The candidates by the default predictor's score source → target, best first (ties keep their order)."""
    edges = affinity["predictors"][affinity["default_predictor"]]["edges"]
    scores = {e["source"]: float(e["score"]) for e in edges if e["target"] == target}
    return sorted(({"task": c, "score": scores[c]} for c in candidates), key=lambda row: -row["score"])


def verify_pairs(alone: Scores, paired: Mapping[str, Scores], metric: str,
                 rule: Rule = Rule()) -> tuple[dict[str, Any], list[str]]:
    """Each pair's gain for the target (its Δ over seeds, p adjusted across the pairs) and the partners
    judged to improve it, in the order of `paired`."""
    pairs = {c: compare(scores, alone, metric) for c, scores in paired.items()}
    family = correct(pairs, rule) if pairs else None
    return {"pairs": pairs, "family": family}, [c for c, cell in pairs.items() if helps(cell)]


def build_selection(target: str, metric: str, runs: Mapping[str, Scores], rule: Rule = Rule()) -> dict[str, Any]:
    """The target's dev score per set of partners (`runs`: alone, selected, all) and the three comparisons
    selected − alone, all − alone and selected − all, one family."""
    comparisons = {"selected vs alone": compare(runs["selected"], runs["alone"], metric),
                   "all vs alone": compare(runs["all"], runs["alone"], metric),
                   "selected vs all": compare(runs["selected"], runs["all"], metric)}
    family = correct(comparisons, rule)
    return {"target": target, "metric": metric, "scores": {name: summary(scores) for name, scores in runs.items()},
            "comparisons": comparisons, "family": family, **rule.fields()}


def write_selection(directory: Path, result: Mapping[str, Any]) -> list[Path]:
    """select.json and select.md; returns the paths."""
    paths = [directory / SELECT.summary, directory / "select.md"]
    write_json(paths[0], dict(result))
    write_text(paths[1], selection_markdown(result))
    return paths


def _pm(entry: Mapping[str, Any]) -> str:
    return f"{entry['mean']:.4f}" + (f" ± {entry['sd']:.4f}" if entry["sd"] is not None else "")


def selection_markdown(result: Mapping[str, Any]) -> str:
    """A short summary of select.json."""
    target, outcome = result["target"], result["outcome"]
    lines = [f"# Partners for {target}", "",
             f"Predictor `{result['predictor']}` ranked {len(result['candidates'])} candidate(s) in "
             f"{result['prediction_cost']['wall_seconds']:.0f} s "
             f"({result['prediction_cost']['train_equivalent_examples']:,.0f} training-equivalent examples):", ""]
    lines += [f"{i}. {row['task']} ({row['score']:+.4g})" for i, row in enumerate(result["ranking"], 1)]
    lines.append("")
    if result["verify"]:
        lines.append(f"Top {result['top']} trained as pairs with {target} (Δ of {target}'s dev {outcome['metric']}, "
                     f"{result['correction']}-adjusted):")
        lines += [f"- {c}: {cell['delta']:+.4f}, p {_p(cell['p_adjusted'])}, {verdict_text(cell)}"
                  for c, cell in result["pairs"].items()]
    else:
        lines.append(f"--no-verify: the top {result['top']} are kept without training them as pairs.")
    split = result.get("outcome_split", "dev")
    dev = result.get("outcome_dev", outcome)
    lines += ["", f"Selected: {', '.join(result['selected']) or 'none (the target alone)'}", ""]
    if result.get("max_steps"):
        lines += [f"Every training run took {result['max_steps']} optimizer steps.", ""]
    if split == "dev":
        lines += [f"| partners | {target} dev {outcome['metric']} (mean ± sd over {len(result['seeds'])} seed(s)) |",
                  "|---|---|"]
        lines += [f"| {name} | {_pm(entry)} |" for name, entry in outcome["scores"].items()]
    else:  # test, scored once; dev beside it
        lines += [f"| partners | {target} test {outcome['metric']} | dev (mean ± sd over {len(result['seeds'])} "
                  "seed(s)) |", "|---|---|---|"]
        lines += [f"| {name} | {_pm(entry)} | {_pm(dev['scores'][name])} |"
                  for name, entry in outcome["scores"].items()]
        lines += ["", "Comparisons on test (the partners were chosen on dev):"]
    lines += ["", "| comparison | Δ | adjusted p | verdict |", "|---|---|---|---|"]
    lines += [f"| {name} | {cell['delta']:+.4f} | {_p(cell['p_adjusted'])} | {verdict_text(cell)} |"
              for name, cell in outcome["comparisons"].items()]
    threshold = "the metric's own" if outcome["min_delta"] is None else outcome["min_delta"]
    lines += ["", f"Rule: {outcome['rule']} (alpha {outcome['alpha']}, min_delta {threshold}; p two-sided)."]
    return "\n".join(lines) + "\n"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
