"""Issue 29's decision rule: t intervals, Holm/BH across a family, the best-constant trivial score,
the adaptive-seed rounds, the graph's reliability and the post-hoc metric label."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mtbio.reporting.relations import build_relations, reliability
from mtbio.reporting.verdicts import (DECIDED, IMPROVES, UNDECIDED, Rule, adjust, compare, correct,
                                      simulate_sequential, t_interval)

V1 = Rule(version="v1")


def test_holm_and_bh_match_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005·4, 0.01·3, 0.03·2, 0.04·1, kept non-decreasing
    assert adjust(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted 0.005·4/1, 0.01·4/2, 0.03·4/3, 0.04·4/4, minimum from the top
    assert adjust(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust(p, "none") == p
    with pytest.raises(ValueError):
        adjust(p, "bonferroni")


def test_t_interval_matches_hand_computed_value() -> None:
    low, high = t_interval([1.0, 2.0, 3.0])  # type: ignore[misc]
    half = 4.302652729911275 / 3 ** 0.5  # t(0.975, 2 df) · sd 1 / √3
    assert (low, high) == pytest.approx((2 - half, 2 + half))
    assert t_interval([1.0]) is None


def test_v1_uses_the_corrected_p_and_names_its_family() -> None:
    cells = {"a->b": compare({1: 0.60, 2: 0.68, 3: 0.62}, {1: 0.50, 2: 0.50, 3: 0.50}),
             "b->a": compare({1: 0.5, 2: 0.7, 3: 0.4}, {1: 0.5, 2: 0.5, 3: 0.5}),
             "c->a": compare({1: 0.5, 2: 0.501, 3: 0.499}, {1: 0.5, 2: 0.5, 3: 0.5})}
    raw = cells["a->b"]["p_value"]
    assert 0.05 / 3 < raw < 0.05  # would pass alone, not after Holm over 3
    family = correct(cells, V1)
    assert family == {"correction": "holm", "m": 3, "tests": ["a->b", "b->a", "c->a"], "rule": "v1"}
    assert cells["a->b"]["p_adjusted"] == pytest.approx(3 * raw) and cells["a->b"]["verdict"] == "undecided"
    assert cells["a->b"]["state"] == UNDECIDED and cells["b->a"]["state"] == UNDECIDED
    assert cells["c->a"]["state"] == DECIDED  # the whole interval inside ±1 point


def test_best_constant_trivial_score_uses_the_scored_splits_majority() -> None:
    from mtbio.data.example import Example
    from mtbio.evaluation.trivial import best_constant_scores, trivial_scores
    from mtbio.tasks.schema import TaskDef

    task = TaskDef(name="c", type="classification", format="tsv", files={"train": "x"}, metric="accuracy",
                   labels=["yes", "no"])
    train = [Example(str(i), label, text="t") for i, label in enumerate(["yes", "yes", "yes", "no"])]
    dev = [Example(str(i), label, text="t") for i, label in enumerate(["no", "no", "no", "yes"])]
    assert trivial_scores(task, train, dev)["accuracy"] == 0.25  # the training majority 'yes'
    assert best_constant_scores(task, dev)["accuracy"] == 0.75  # dev's own majority 'no'


def _edge(source: str, target: str, per_seed: list[float]) -> dict[str, Any]:
    return {"source": source, "target": target, "per_seed": {str(s): {"delta": d} for s, d in enumerate(per_seed)}}


def test_reliability_matches_hand_computed_figures() -> None:
    # seeds as rows [1,2,3,4], [1,2,3,4], [1,2,4,3]: seed-pair Spearman 1, 0.8, 0.8
    edges = [_edge("x", "A", [1, 1, 1]), _edge("y", "A", [2, 2, 2]), _edge("x", "B", [3, 3, 4]),
             _edge("y", "B", [4, 4, 3])]
    figures = reliability(edges)
    assert figures is not None
    r1 = (1 + 0.8 + 0.8) / 3
    assert figures["seed_pair_spearman"] == pytest.approx(r1)
    assert figures["spearman_brown"] == pytest.approx(3 * r1 / (1 + 2 * r1))
    assert figures["noise_ceiling"] == pytest.approx((3 * r1 / (1 + 2 * r1)) ** 0.5)
    # centred per target: seeds [-.5,.5,-.5,.5] twice and [-.5,.5,.5,-.5]: Spearman 1, 0, 0
    within = figures["within_target"]
    assert within["seed_pair_spearman"] == pytest.approx(1 / 3)
    assert within["spearman_brown"] == pytest.approx(0.6) and within["noise_ceiling"] == pytest.approx(0.6 ** 0.5)


def test_relations_carry_interval_family_and_reliability() -> None:
    base = {"a": {1: 0.5, 2: 0.5, 3: 0.5}, "b": {1: 0.5, 2: 0.5, 3: 0.5}}
    together = {("a", "b"): {1: 0.6, 2: 0.61, 3: 0.62}, ("b", "a"): {1: 0.4, 2: 0.6, 3: 0.5}}
    relations = build_relations({"a": "accuracy", "b": "accuracy"}, base, together, Rule(correction="bh"))
    assert relations["family"]["correction"] == "bh" and relations["family"]["m"] == 2
    assert all(len(e["ci"]) == 2 and "p_adjusted" in e and "state" in e for e in relations["edges"])
    assert relations["reliability"] is None  # two edges: no ranking to repeat


def test_sequential_design_without_correction_errs_more_than_with_holm() -> None:
    holm = simulate_sequential(0.02, max_seeds=6, rule=V1, runs=40, edges=6)
    plain = simulate_sequential(0.02, max_seeds=6, rule=Rule(version="v1", correction="none"), runs=40, edges=6)
    assert sum(holm[k] for k in ("false_green", "false_red", "no_effect", "undecided")) == pytest.approx(1.0)
    assert plain["false_green"] + plain["false_red"] > holm["false_green"] + holm["false_red"]
    assert 3 <= holm["mean_seeds"] <= 6
    tight = simulate_sequential(0.001, max_seeds=6, rule=V1, runs=20, edges=6)
    assert tight["no_effect"] == 1.0 and tight["mean_seeds"] == 3  # decided in the first round
    assert tight["family_wise_error"] == 0.0
    # a graph errs when any of its edges does: at least the per-edge rate, at most edges x it
    per_edge = plain["false_green"] + plain["false_red"]
    assert per_edge <= plain["family_wise_error"] <= min(1.0, 6 * per_edge) + 1e-12
    fixed = simulate_sequential(0.02, max_seeds=6, rule=V1, start=6, runs=40, edges=6)
    assert fixed["mean_seeds"] == 6  # start = max_seeds: one look, the fixed design


DELTAS = {("kw-all", "kw-few"): lambda s: 0.1 + 0.001 * (s % 3),  # green at 3 seeds
          ("kw-noise", "kw-all"): lambda s: [0.05, -0.05, 0.08, -0.07, 0.06, -0.04][s - 42]}  # never decided


def test_adaptive_rounds_add_seeds_only_to_undecided_edges_and_stop(
        tmp_path: Path, keyword_tasks: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Synthetic scores (no training): every edge but kw-noise → kw-all is decided at 3 seeds."""
    from mtbio.experiments import pairwise as module
    from mtbio.experiments.study_config import StudyConfig

    def score(cell: Any, task: Any, split: str = "dev") -> float:
        if cell.kind == "baseline":
            return 0.5
        partner = next(t for t in cell.tasks if t != task.name)
        small = 0.0001 * ((cell.seed % 3) - 1)  # Δ within ±0.01 point: "no effect larger than min-delta"
        return 0.5 + DELTAS.get((partner, task.name), lambda s: small)(cell.seed)

    rounds: list[list[Any]] = []

    def drive(cells: list[Any], *args: Any) -> dict[str, Any]:
        rounds.append(list(cells))
        return args[5](cells)  # collect

    monkeypatch.setattr(module, "cell_score", score)
    monkeypatch.setattr(module, "drive_sweep", drive)
    defs, data = keyword_tasks
    config = StudyConfig(tasks=["kw-few", "kw-all", "kw-noise"], task_defs=[defs], data_dir=data, encoder="x",
                         output=str(tmp_path / "s"), seeds=3, max_seeds=5)
    _, relations = module.pairwise(config, echo=lambda _: None)
    assert relations is not None
    assert [len(r) for r in rounds] == [18, 20, 22]  # 3 seeds × (3 baselines + 3 pairs), then +2, +2
    assert {(c.kind, c.tasks, c.seed) for c in rounds[1][18:]} == {("baseline", ("kw-all",), 45),
                                                                  ("pair", ("kw-all", "kw-noise"), 45)}
    edges = {(e["source"], e["target"]): e for e in relations["edges"]}
    assert edges[("kw-noise", "kw-all")]["n_seeds"] == 5 and edges[("kw-noise", "kw-all")]["state"] == UNDECIDED
    assert edges[("kw-all", "kw-few")]["verdict"] == IMPROVES
    assert all(e["state"] == DECIDED and e["n_seeds"] == 3 for k, e in edges.items() if k != ("kw-noise", "kw-all"))


def test_a_metric_other_than_the_declared_one_is_labelled_post_hoc() -> None:
    from mtbio.reporting.tables import metric_label

    assert metric_label("macro_f1", "micro_f1") == "macro_f1, post hoc (declared: micro_f1)"
    assert metric_label("micro_f1", "micro_f1") == "micro_f1"
