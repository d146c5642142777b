"""Loss weighting: `fixed` leaves the loss as it was; `uncertainty` (Kendall et al., 2018) learns a
log-variance per task that the optimizer trains, checkpoints save and resume, and that --eval-test's
reload of the best weights leaves alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import mtbio
from mtbio.errors import MtbioError
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.refine import refine
from mtbio.model.weightings import build_weighting
from mtbio.training import checkpoint as ckpt
from mtbio.training.config import RunConfig, build_config

UNCERTAINTY = {"name": "uncertainty", "lr": 0.05}


def _defs_with_test(directory: Path) -> str:
    """The two demo tasks with their dev file also as a test split (the samples ship none), for --eval-test."""
    directory.mkdir(exist_ok=True)
    for name in ("demo-ner", "demo-relation"):
        text = (SAMPLE_DIR / "task_defs" / f"{name}.yml").read_text()
        dev = next(line for line in text.splitlines() if line.strip().startswith("dev:"))
        (directory / f"{name}.yml").write_text(text.replace(dev, dev + "\n" + dev.replace("dev:", "test:")))
    return str(directory)


def _config(output: Path, encoder: str, **overrides: object) -> RunConfig:
    values = dict(tasks=["demo-ner", "demo-relation"], task_defs=[_defs_with_test(output.parent / "defs")],
                  data_dir=str(SAMPLE_DIR), encoder=encoder, output=str(output), max_steps=6, save_every=3,
                  batch_size=8, max_train_examples=32, seed=7, max_length=48, weighting=UNCERTAINTY)
    values.update(overrides)
    return RunConfig(**values)


def test_uncertainty_is_loss_times_exp_minus_s_plus_s() -> None:
    weighting = build_weighting("uncertainty", {"init": 0.5}, ["a", "b"])
    loss = torch.tensor(2.0)
    assert torch.isclose(weighting("b", loss), loss * torch.exp(torch.tensor(-0.5)) + 0.5)
    weighting("a", loss).backward()
    assert weighting.log_var.grad.tolist() == pytest.approx([1 - 2.0 * torch.exp(torch.tensor(-0.5)).item(), 0.0])
    assert build_weighting("fixed", {}, ["a"])("a", loss) is loss
    assert list(build_weighting("fixed", {}, ["a"]).state_dict()) == []  # a fixed run's files hold nothing new


def test_options_by_name_or_mapping() -> None:
    assert RunConfig().weighting_spec() == ("fixed", {})
    assert build_config({}, {"weighting": "uncertainty"}).weighting_spec() == ("uncertainty", {"init": 0.0, "lr": None})
    assert build_config({"weighting": UNCERTAINTY}, {}).weighting == {"name": "uncertainty", "init": 0.0, "lr": 0.05}
    with pytest.raises(MtbioError, match="unknown loss weighting 'kendall'"):
        build_config({"weighting": "kendall"}, {})
    with pytest.raises(MtbioError, match="rate: not an option of this weighting"):
        build_config({"weighting": {"name": "uncertainty", "rate": 1}}, {})


def test_uncertainty_trains_resumes_and_scores_test(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir, results = refine(_config(tmp_path / "run", tiny_encoder, eval_test=True))
    learned = results["weighting"]["log_var"]
    assert set(learned) == {"demo-ner", "demo-relation"} and all(abs(v) > 1e-3 for v in learned.values())  # moved
    assert set(results["test"]) == {"demo-ner", "demo-relation"}  # the strict reload of the best weights worked
    final = load_file(str(run_dir / "checkpoints" / "step-00000006" / "model.safetensors"))
    assert final["weighting.log_var"].tolist() == pytest.approx(list(learned.values()))
    assert not any(k.startswith("weighting") for k in load_file(str(run_dir / "heads" / "demo-ner" / "model.safetensors")))
    assert mtbio.load(run_dir).predict("demo-relation", ["@DRUG$ increases @DRUG$ levels ."])

    # interrupted after step 3: resuming trains the log-variances on from their saved values, to the same end
    ckpt_dir = run_dir / "checkpoints"
    for later in ckpt.list_checkpoints(ckpt_dir)[1:]:
        later.rename(tmp_path / later.name)
    (run_dir / "results.json").unlink()
    _, resumed = refine(_config(tmp_path / "run", tiny_encoder, eval_test=True, resume=True))
    assert resumed["weighting"]["log_var"] == pytest.approx(learned, abs=1e-5)


def test_fixed_weighting_writes_no_weighting_results(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir, results = refine(_config(tmp_path / "run", tiny_encoder, weighting="fixed", max_steps=2, save_every=None))
    assert "weighting" not in results
    saved = load_file(str(ckpt.latest_checkpoint(run_dir / "checkpoints") / "model.safetensors"))
    assert not any(k.startswith("weighting") for k in saved)
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 2
