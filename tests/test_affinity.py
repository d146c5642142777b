"""mtbio affinity: the lookahead step, the synthetic helper / noise setup of the pairwise tests, an
unchanged training trajectory, the comparison with a measured graph, and the commands end to end."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from scipy.stats import kendalltau, spearmanr
from test_relations import _config

from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.affinity import affinity
from mtbio.experiments.training_run import train_tasks
from mtbio.reporting.affinity import bootstrap_interval, compare_prediction, pruned_pairs, seed_agreement, top_k
from mtbio.tasks.loading import load_catalog
from mtbio.training.affinity import AffinityProbe, step_from
from mtbio.training.events import Listener
from mtbio.training.optim import build_optimizer

SAMPLES = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"


# ---- the lookahead step ----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda p: build_optimizer([{"params": p, "weight_decay": 0.0}], "adamw", 1e-2),
    lambda p: build_optimizer([{"params": p, "weight_decay": 0.0}], "adamw", 1e-2, {"bias_correction": False}),
    lambda p: build_optimizer([{"params": p, "weight_decay": 0.0}], "adamax", 1e-2),
])
def test_the_lookahead_step_is_the_gradients_part_of_the_optimizers_update(make) -> None:  # type: ignore[no-untyped-def]
    """With the momentum zeroed, the real next step is exactly the part `step_from` attributes to the gradient."""
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(5, 3))
    optimizer = make([param])
    for _ in range(3):
        param.grad = torch.randn(5, 3)
        optimizer.step()
    grad = torch.randn(5, 3)
    state = copy.deepcopy(optimizer.state[param])
    predicted = step_from(optimizer, optimizer.param_groups[0], grad, optimizer.state[param])
    assert all(torch.equal(state[k], optimizer.state[param][k]) for k in state)  # the state is only read
    optimizer.state[param]["exp_avg"].zero_()
    before = param.detach().clone()
    param.grad = grad
    optimizer.step()
    assert torch.allclose(before - param.detach(), predicted, atol=1e-7, rtol=1e-5)


# ---- the synthetic setup ------------------------------------------------------------------------------
def test_the_helper_pair_scores_highest_and_the_noise_task_lowest(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    config = _config(keyword_tasks, micro_encoder, tmp_path / "aff", seeds=2, affinity_every=10)
    directory, result = affinity(config, echo=lambda _: None)
    cosine = {(e["source"], e["target"]): e for e in result["predictors"]["cosine"]["edges"]}
    best = max(cosine, key=lambda pair: cosine[pair]["score"])
    assert set(best) == {"kw-all", "kw-few"}, cosine
    for target, other in (("kw-few", "kw-all"), ("kw-all", "kw-few")):  # noise is each target's lowest source
        assert cosine[("kw-noise", target)]["score"] < cosine[(other, target)]["score"]
    assert cosine[("kw-all", "kw-few")]["score"] > 0.1
    edge = cosine[("kw-all", "kw-few")]
    assert edge["n_points"] == 48 and set(edge["per_seed"]) == {"42", "43"} and edge["sd_seeds"] is not None
    lookahead = result["predictors"]["lookahead"]["edges"]
    assert len(lookahead) == 6 and all(np.isfinite(e["score"]) and e["sd_points"] > 0 for e in lookahead)
    compute = result["compute"]
    assert compute["train_examples"] == 2 * 4 * 480 and compute["points"] == {"42": 24, "43": 24}
    assert compute["measure_backward_examples"] == 2 * 24 * 3 * 32 and compute["wall_seconds"] > compute["measure_seconds"] > 0

    for name in ("affinity.json", "affinity_matrix.csv", "cosine_matrix.csv", "affinity.dot", "affinity.graphml"):
        assert (directory / name).is_file(), name
    import matplotlib.image
    import networkx as nx

    for png in ("affinity_matrix.png", "cosine_matrix.png", "affinity.png"):
        image = matplotlib.image.imread(directory / png)
        assert image.shape[0] > 200 and image.std() > 0.01, png
    assert nx.read_graphml(directory / "affinity.graphml").graph["kind"] == "affinity-cosine"
    assert (directory / "cosine_matrix.csv").read_text().splitlines()[0] == "target \\ source,kw-few,kw-all,kw-noise"
    assert pruned_pairs(result, ["kw-few", "kw-all", "kw-noise"], 1, "cosine") >= {frozenset(("kw-all", "kw-few"))}

    stamp = (directory / "seed-42" / "results.json").stat().st_mtime_ns
    affinity(config, echo=lambda _: None)  # finished seeds are not trained again
    assert (directory / "seed-42" / "results.json").stat().st_mtime_ns == stamp
    with pytest.raises(MtbioError, match="measured with"):
        affinity(config.model_copy(update={"predictor": {"name": "cosine", "every": 5}}), echo=lambda _: None)


# ---- the trajectory ------------------------------------------------------------------------------------
def _final_weights(keyword_tasks: tuple[str, str], encoder: str, run_dir: Path,
                   hooks: list) -> dict[str, torch.Tensor]:  # type: ignore[type-arg]
    defs, data = keyword_tasks
    catalog = load_catalog([defs])
    config = _config(keyword_tasks, encoder, run_dir, epochs=1, tasks=["kw-few", "kw-all"], seeds=None)
    final: dict[str, torch.Tensor] = {}

    class Keep(Listener):
        def on_step_end(self, trainer, flow) -> None:  # type: ignore[no-untyped-def]
            if trainer.state.global_step == trainer.total_steps:
                final.update({k: v.detach().clone() for k, v in trainer.unwrapped.state_dict().items()})

    train_tasks([catalog.tasks["kw-few"], catalog.tasks["kw-all"]], config, run_dir, encoder, 5e-3, "refine",
                Path(data), listeners=[*hooks, Keep()])
    return final


def test_measuring_leaves_the_weights_and_the_trajectory_unchanged(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    """Dropout is on (the micro encoder and the heads): a probe that consumed the torch RNG would show."""
    plain = _final_weights(keyword_tasks, micro_encoder, tmp_path / "plain", [])
    probe = AffinityProbe(every=3, batch_size=16, seed=42)
    measured = _final_weights(keyword_tasks, micro_encoder, tmp_path / "measured", [probe])
    assert len(probe.points) == 12 and plain.keys() == measured.keys()
    assert all(torch.equal(plain[k], measured[k]) for k in plain)
    losses = [[line["loss"] for line in map(json.loads, (tmp_path / run / "metrics.jsonl").read_text().splitlines())
               if line["split"] == "train"] for run in ("plain", "measured")]
    assert losses[0] == losses[1]
    # the check can fail: one random draw per step changes the run
    class Draw(Listener):
        def on_step_end(self, trainer, flow) -> None:  # type: ignore[no-untyped-def]
            torch.rand(1)

    drawn = _final_weights(keyword_tasks, micro_encoder, tmp_path / "drawn", [Draw()])
    assert not all(torch.equal(plain[k], drawn[k]) for k in plain)


# ---- prediction against measurement ---------------------------------------------------------------------
TASKS = ["a", "b", "c", "d"]
MEASURED = {("b", "a"): 0.04, ("c", "a"): -0.01, ("d", "a"): 0.00, ("a", "b"): 0.02, ("c", "b"): 0.03,
            ("d", "b"): -0.02, ("a", "c"): -0.03, ("b", "c"): 0.01, ("d", "c"): 0.05, ("a", "d"): 0.00,
            ("b", "d"): -0.04, ("c", "d"): 0.02}
PREDICTED = {("b", "a"): 0.30, ("c", "a"): 0.10, ("d", "a"): -0.20, ("a", "b"): 0.05, ("c", "b"): 0.40,
             ("d", "b"): 0.00, ("a", "c"): -0.10, ("b", "c"): -0.05, ("d", "c"): 0.20, ("a", "d"): 0.30,
             ("b", "d"): -0.30, ("c", "d"): 0.25}


def _handmade(tmp_path: Path) -> tuple[Path, Path]:
    pairwise_dir, affinity_dir = tmp_path / "pairwise", tmp_path / "affinity"
    pairwise_dir.mkdir()
    affinity_dir.mkdir()
    relations = {"kind": "pairwise", "split": "dev", "seeds": [42],
                 "nodes": [{"task": t} for t in TASKS],
                 "edges": [{"source": s, "target": t, "delta": d} for (s, t), d in MEASURED.items()]}
    (pairwise_dir / "relations.json").write_text(json.dumps(relations))
    for cell, results in (("baselines/a/seed-42", {"train_examples": 100, "wall_seconds": 10.0}),
                          ("pairs/a+b/seed-42", {"train_examples": 200, "wall_seconds": 30.0}),
                          ("pairs/a+c/seed-43", {"train_examples": 999, "wall_seconds": 99.0}),  # another seed
                          ("pairs/c+d/seed-42", {"steps": 5, "wall_seconds": 20.0})):  # predates train_examples
        (pairwise_dir / cell).mkdir(parents=True)
        (pairwise_dir / cell / "results.json").write_text(json.dumps(results))
    (pairwise_dir / "pairs/c+d/seed-42/config.yaml").write_text("batch_size: 8\n")
    edges = [{"source": s, "target": t, "score": v} for (s, t), v in PREDICTED.items()]
    affinity_json = {"kind": "affinity", "tasks": TASKS, "seeds": [42], "default_predictor": "cosine",
                     "predictors": {"lookahead": {"edges": edges},
                                    "cosine": {"edges": [dict(e, score=-e["score"]) for e in edges]}},
                     "compute": {"train_examples": 30, "measure_backward_examples": 6, "measure_forward_examples": 12,
                                 "measure_seconds": 1.0, "wall_seconds": 6.0}}
    (affinity_dir / "affinity.json").write_text(json.dumps(affinity_json))
    return pairwise_dir, affinity_dir


def test_report_compares_prediction_and_measurement(tmp_path: Path) -> None:
    pairwise_dir, affinity_dir = _handmade(tmp_path)
    pairs = sorted(MEASURED)
    x, y = [PREDICTED[p] for p in pairs], [MEASURED[p] for p in pairs]
    result = CliRunner().invoke(main, ["report", str(pairwise_dir), str(affinity_dir)])
    assert result.exit_code == 0, result.output
    saved = json.loads((affinity_dir / "comparison.json").read_text())
    lookahead = saved["predictors"]["lookahead"]
    assert lookahead["spearman"] == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert lookahead["kendall"] == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
    assert saved["predictors"]["cosine"]["spearman"] == pytest.approx(-lookahead["spearman"])
    assert saved["best_predictor"] == "lookahead" and lookahead["pairs"] == 12
    low, high = lookahead["interval"]["spearman"]
    assert low < lookahead["spearman"] < high
    # top-1 by hand, predicted (measured best): a: b (b), b: c (c), c: d (d), d: a (c, and a → d has Δ 0)
    assert lookahead["top_k"][0] == {"k": 1, "targets": 4, "precision": 0.75, "helpful": 0.75, "chance": pytest.approx(1 / 3)}
    compute = saved["compute"]
    assert compute["pairwise"] == {"cells": 3, "train_examples": 100 + 200 + 5 * 8, "wall_seconds": 60.0,
                                   "cells_estimated": 1}
    assert compute["fraction_wall_seconds"] == pytest.approx(0.1)
    assert compute["fraction_examples"] == pytest.approx((30 + 6 + 12 / 3) / 340)
    assert f"Spearman {lookahead['spearman']:+.3f}" in result.output and "affinity / pairwise: wall time 0.100" in result.output
    assert (affinity_dir / "comparison.png").is_file()
    assert saved["measured_seed_agreement"] is None  # one seed: nothing to agree with
    refused = CliRunner().invoke(main, ["report", str(pairwise_dir), str(affinity_dir), "--label", "x"])
    assert refused.exit_code == 2 and "reported alone" in refused.output


def test_seed_agreement_is_the_mean_spearman_between_seeds() -> None:
    # three edges; seed 1 and 2 rank them the same (rho 1), seed 3 reverses them (rho -1 with each): mean -1/3
    edges = [{"per_seed": {"1": v1, "2": v2, "3": v3}} for v1, v2, v3 in ((0.1, 1.0, 9.0), (0.2, 2.0, 8.0),
                                                                           (0.3, 3.0, 7.0))]
    assert seed_agreement(edges, lambda e, s: e["per_seed"][s]) == pytest.approx(-1 / 3)
    assert seed_agreement(edges[:2], lambda e, s: e["per_seed"][s]) is None  # two edges: no ranking to speak of
    assert seed_agreement([{"per_seed": {"1": 1.0}}] * 3, lambda e, s: e["per_seed"][s]) is None


def test_top_k_counts_only_targets_with_more_partners_than_k() -> None:
    one = top_k(PREDICTED, MEASURED, TASKS, 3)  # three partners each: every pick is in the top 3
    assert one["targets"] == 0 and one["precision"] is None
    two = top_k(PREDICTED, MEASURED, TASKS, 2)
    assert two["targets"] == 4 and two["chance"] == pytest.approx(2 / 3)
    with pytest.raises(MtbioError, match="ordered pair"):
        compare_prediction({"nodes": [], "edges": []}, {"predictors": {"lookahead": {"edges": []}}})


def test_bootstrap_interval_matches_scipy_on_every_resample() -> None:
    """The intervals come from all resamples at once; each resample's Spearman and tau-b are scipy's, ties
    included, and resamples with a constant side are left out."""
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, 9).astype(float), rng.integers(0, 3, 9).astype(float)  # many ties
    rounds = 300
    idx = np.random.default_rng(7).integers(0, len(x), (rounds, len(x)))
    kept = [(x[i], y[i]) for i in idx if np.ptp(x[i]) > 0 and np.ptp(y[i]) > 0]
    assert 0 < len(kept) < rounds
    rho = [spearmanr(a, b).statistic for a, b in kept]
    tau = [kendalltau(a, b).statistic for a, b in kept]
    got = bootstrap_interval(x, y, rounds, seed=7)
    assert got["spearman"] == pytest.approx([np.percentile(rho, 2.5), np.percentile(rho, 97.5)], abs=1e-12)
    assert got["kendall"] == pytest.approx([np.percentile(tau, 2.5), np.percentile(tau, 97.5)], abs=1e-12)
    assert np.isnan(bootstrap_interval(np.ones(5), y[:5], 50)["spearman"]).all()


# ---- the commands end to end ------------------------------------------------------------------------------
def test_affinity_then_a_pruned_pairwise_on_demo_data(tmp_path: Path, tiny_encoder: str) -> None:
    common = ["--tasks", "demo-hoc,demo-ner,demo-sts", "--task-defs", str(SAMPLES / "task_defs"), "--data-dir",
              str(SAMPLES), "--encoder", tiny_encoder, "--max-steps", "4", "--batch-size", "4",
              "--max-train-examples", "16", "--max-length", "32", "--seeds", "1"]
    done = CliRunner().invoke(main, ["affinity", *common, "--affinity-every", "2", "--affinity-batch-size", "4",
                                     "--affinity-split", "dev", "--output", str(tmp_path / "aff")])
    assert done.exit_code == 0, done.output
    assert "gradient cosine" in done.output and "most promising source" in done.output
    saved = json.loads((tmp_path / "aff" / "affinity.json").read_text())
    assert saved["compute"]["points"] == {"42": 2} and saved["measurement"]["split"] == "dev"

    pruned = CliRunner().invoke(main, ["pairwise", *common, "--prune", "1", "--affinity", str(tmp_path / "aff"),
                                       "--output", str(tmp_path / "pw")])
    assert pruned.exit_code == 0, pruned.output
    kept = pruned_pairs(saved, ["demo-hoc", "demo-ner", "demo-sts"], 1, "cosine")
    assert f"--prune 1: {len(kept)} of 3 pairs" in pruned.output
    trained = {frozenset(p.name.split("+")) for p in (tmp_path / "pw" / "pairs").iterdir()}
    assert trained == kept and len(list((tmp_path / "pw" / "baselines").iterdir())) == 3

    report = CliRunner().invoke(main, ["report", str(tmp_path / "pw"), str(tmp_path / "aff")])
    assert report.exit_code == 0, report.output
    assert "best predictor by within-target Spearman" in report.output and (tmp_path / "aff" / "comparison.json").is_file()
    alone = CliRunner().invoke(main, ["pairwise", *common, "--prune", "1", "--output", str(tmp_path / "pw")])
    assert alone.exit_code == 2 and "--prune K and --affinity DIR go together" in alone.output


def test_an_interrupted_joint_cell_resumes_with_its_measurements(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A joint cell stopped by a signal (a session ending) continues from its checkpoint on the next run instead
    of starting over, and its affinity points are those of a run that was never stopped; a checkpoint without
    the points (written before probes saved them) is not resumed."""
    import os
    import signal

    import mtbio.experiments.sweep as sweep
    from mtbio.training.trainer import StopRequested, make_accelerator

    defs, _ = keyword_tasks
    catalog = load_catalog([defs]).tasks
    config = _config(keyword_tasks, micro_encoder, tmp_path, epochs=2, tasks=["kw-few", "kw-all"], seeds=None,
                     affinity_every=2, max_train_examples=48)
    state = make_accelerator(config.mixed_precision)

    def cell(name: str) -> sweep.Cell:
        return sweep.Cell("joint", ("kw-few", "kw-all"), 42, tmp_path / name / "seed-42", "refine", 5e-3)

    sweep.train_cell(cell("whole"), config, catalog, Path(config.data_dir), state)

    class StoppedAfterFirstCheckpoint(AffinityProbe):
        saved = False

        def on_save(self, trainer, flow) -> None:  # type: ignore[no-untyped-def]
            self.saved = True

        def on_step_end(self, trainer, flow) -> None:  # type: ignore[no-untyped-def]
            super().on_step_end(trainer, flow)
            if self.saved:  # the step after the first epoch's checkpoint: the trainer saves again and stops
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(sweep, "AffinityProbe", StoppedAfterFirstCheckpoint)
    with pytest.raises(StopRequested):
        sweep.train_cell(cell("stopped"), config, catalog, Path(config.data_dir), state)
    stopped = cell("stopped").run_dir
    assert not (stopped / "results.json").exists() and list((stopped / "checkpoints").glob("step-*"))
    with pytest.raises(StopRequested):
        sweep.train_cell(cell("older"), config, catalog, Path(config.data_dir), state)
    monkeypatch.setattr(sweep, "AffinityProbe", AffinityProbe)
    sweep.train_cell(cell("stopped"), config, catalog, Path(config.data_dir), state)
    assert "resumed from" in (stopped / "run.log").read_text()
    monkeypatch.setattr(sweep, "listener_states", lambda _path: {})  # a checkpoint from before probes saved points
    sweep.train_cell(cell("older"), config, catalog, Path(config.data_dir), state)
    assert "resumed from" not in (cell("older").run_dir / "run.log").read_text()  # started over: nothing lost
    whole, resumed, older = (json.loads((tmp_path / name / "seed-42" / "affinity_points.json").read_text())["points"]
                             for name in ("whole", "stopped", "older"))
    assert [p["step"] for p in resumed] == [p["step"] for p in whole] == [p["step"] for p in older]
    assert len(whole) >= 3
    for a, b in zip(whole, resumed):
        for source, row in a["lookahead"].items():
            assert row == pytest.approx(b["lookahead"][source], abs=1e-6)
            assert a["cosine"][source] == pytest.approx(b["cosine"][source], abs=1e-6)
