"""`mtbio transfer`: a target never in its refinement set, fine-tuned at several sizes from the plain and the
refined encoder; resumable (a second run with more sizes trains only the new cells); the table's Δ, interval
and marks recomputed from the cells' files."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from mtbio.cli import main

from mtbio.errors import MtbioError
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.transfer import size_of, target_sizes, transfer_plan
from mtbio.reporting.verdicts import t_interval


def _mtbio(*args: str) -> Result:
    """An mtbio command in this process (click's runner: no new Python importing torch for each)."""
    done = CliRunner().invoke(main, list(args))
    assert done.exit_code == 0, (args[0], done.output[-3000:], done.exception)
    return done


def _cli(keyword_tasks: tuple[str, str], encoder: str, output: Path, sizes: str, *more: str) -> list[str]:
    defs, data = keyword_tasks
    return ["transfer", "--refine-on", "kw-all,kw-noise", *more, "--targets", "kw-few",
            "--sizes", sizes, "--task-defs", defs, "--data-dir", data, "--encoder", encoder, "--output", str(output),
            "--seeds", "3", "--epochs", "1", "--batch-size", "8", "--lr", "5e-3"]


def test_transfer_trains_each_target_from_both_encoders_and_resumes(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    out = tmp_path / "t"
    first = _mtbio(*_cli(keyword_tasks, micro_encoder, out, "16"))
    assert len(re.findall(r"^\[\d+/\d+\] ", first.stdout, re.M)) == 1 + 3 * 2  # one refine, 3 seeds × 2 starts
    refined = out / "refined" / "kw-all+kw-noise" / "seed-42"
    assert yaml.safe_load((refined / "config.yaml").read_text())["tasks"] == ["kw-all", "kw-noise"]
    assert any((refined / "encoder").glob("*.safetensors"))  # kept: the refined encoder is what is studied
    start = out / "targets" / "kw-few" / "n-16" / "from-kw-all+kw-noise" / "seed-43"
    settings = yaml.safe_load((start / "config.yaml").read_text())
    assert settings["from_run"] == str(refined) and settings["max_train_examples"] == 16

    second = _mtbio(*_cli(keyword_tasks, micro_encoder, out, "16,all"))
    started = re.findall(r"^\[\d+/\d+\] (.*) → ", second.stdout, re.M)
    assert len(started) == 6 and all("96 examples" in s for s in started)  # only the new size trains
    assert "n=  all (96)" in second.stdout

    table = json.loads((out / "transfer.json").read_text())
    assert (out / "transfer.png").is_file() and table["family"]["m"] == 2
    row = table["targets"][0]
    point = next(p for p in row["points"] if p["size"] == "16")
    by_seed = {}
    for start in ("plain", "from-kw-all+kw-noise"):
        for seed in (42, 43, 44):
            results = json.loads((out / "targets/kw-few/n-16" / start / f"seed-{seed}" / "results.json").read_text())
            by_seed.setdefault(start, []).append(results["dev"]["kw-few"]["accuracy"])
    deltas = [r - p for r, p in zip(by_seed["from-kw-all+kw-noise"], by_seed["plain"])]
    cell = point["from"]["kw-all+kw-noise"]
    assert cell["delta"] == pytest.approx(statistics.fmean(deltas))
    assert cell["ci"] == pytest.approx(list(t_interval(deltas, 0.95)))
    assert point["plain"]["mean"] == pytest.approx(statistics.fmean(by_seed["plain"]))
    assert set(point["no_training"]) == {"plain", "kw-all+kw-noise"}  # each starting encoder's probe
    probe = point["no_training"]["plain"]["probe"]
    assert ("plain" in point["below"]) == (probe > point["plain"]["mean"] or
                                           abs(point["plain"]["mean"] - row["trivial"]) < 0.01)
    variant = tmp_path / "l2sp"  # a refinement variant trained elsewhere, given as a run directory
    defs, data = keyword_tasks
    _mtbio("refine", "--tasks", "kw-all", "--task-defs", defs, "--data-dir", data, "--encoder", micro_encoder,
           "--epochs", "1", "--batch-size", "8", "--lr", "5e-3", "--l2sp", "40", "--output", str(variant))
    third = _mtbio(*_cli(keyword_tasks, micro_encoder, out, "16,all", "--refine-on", str(variant)))
    started = re.findall(r"^\[\d+/\d+\] (.*) → ", third.stdout, re.M)
    assert len(started) == 6 and all(s.startswith("transfer l2sp") for s in started)  # only the new start trains
    table = json.loads((out / "transfer.json").read_text())
    assert set(table["targets"][0]["points"][0]["from"]) == {"kw-all+kw-noise", "l2sp"} and table["family"]["m"] == 4
    assert "kw-few (accuracy; trivial" in _mtbio("report", str(out)).stdout


def test_a_target_must_be_missing_from_some_refinement_set(keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    config = StudyConfig(refine_on=["kw-all,kw-few"], transfer_targets=["kw-few"], task_defs=[defs], data_dir=data)
    with pytest.raises(MtbioError, match="kw-few are in every refinement set"):
        transfer_plan(config)
    assert size_of("all", 96) == 96 and size_of("200", 96) == 96 and size_of("50", 96) == 50
    assert target_sizes(["50", "200", "1000", "all"], 96) == {"50": 50, "all": 96}
    assert target_sizes(["50", "96"], 96) == {"50": 50, "all": 96}
    with pytest.raises(MtbioError, match="neither a positive number"):
        size_of("half", 96)


def test_the_average_over_points_is_a_paired_test_per_seed_against_hand_computed_values() -> None:
    from mtbio.reporting.transfer import build_transfer

    plain = {("a", "10"): {42: 0.2, 43: 0.4, 44: 0.3}, ("b", "10"): {42: 0.6, 43: 0.5, 44: 0.7}}
    refined = {("r", "a", "10"): {42: 0.5, 43: 0.6, 44: 0.7}, ("r", "b", "10"): {42: 0.6, 43: 0.6, 44: 0.5}}
    table = build_transfer({"a": "accuracy", "b": "accuracy"}, {"r": ["x"]}, {"a": {"10": 10}, "b": {"10": 10}},
                           plain, refined)
    average = table["average"]
    assert average["points_per_seed"] == [2]
    assert average["starts"]["plain"]["per_seed"] == pytest.approx({"42": 0.4, "43": 0.45, "44": 0.5})
    assert average["starts"]["r"]["mean"] == pytest.approx((0.55 + 0.6 + 0.6) / 3)
    cell = average["pairs"]["r vs plain"]
    deltas = [0.55 - 0.4, 0.6 - 0.45, 0.6 - 0.5]  # per seed: mean over the two points, refined minus plain
    assert cell["delta"] == pytest.approx(statistics.fmean(deltas))
    assert cell["ci"] == pytest.approx(list(t_interval(deltas, 0.95)))
    # v2, a family of one: p of "beyond ±1 point", two-sided; with 2 df, P(T ≥ t) = (1 − t / √(t² + 2)) / 2
    t = (statistics.fmean(deltas) - 0.01) / (statistics.stdev(deltas) / 3 ** 0.5)
    assert cell["p_adjusted"] == pytest.approx(1 - t / (t * t + 2) ** 0.5) and average["family"]["m"] == 1
