"""Optimizers are registered components (issue 66): one file each, `--optimizer NAME`, and a new one is one module."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.training.optimizers import OPTIMIZERS, register_optimizer


def _finetune(out: Path, encoder: str, *extra: str) -> None:
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                       "--data-dir", str(SAMPLE_DIR), "--encoder", encoder, "--max-steps", "3",
                                       "--batch-size", "8", "--no-baselines", "--output", str(out), *extra])
    assert result.exit_code == 0, result.output


def test_adafactor_trains_and_resumes_from_its_checkpoint(tmp_path: Path, tiny_encoder: str) -> None:
    _finetune(tmp_path / "a", tiny_encoder, "--optimizer", "adafactor", "--save-every", "2")
    results = json.loads((tmp_path / "a" / "demo-nli" / "results.json").read_text())
    assert results["steps"] == 3
    assert "optimizer: adafactor" in (tmp_path / "a" / "demo-nli" / "config.yaml").read_text()


def test_a_new_optimizer_is_one_registration(tmp_path: Path, tiny_encoder: str) -> None:
    """ARCHITECTURE.md's "Add an optimizer": a factory registered under a name trains through --optimizer."""
    used: list[float] = []

    def sgd(groups: list[dict], lr: float) -> torch.optim.Optimizer:
        used.append(lr)
        return torch.optim.SGD(groups, lr=lr, momentum=0.9)

    register_optimizer("test-sgd")(sgd)
    try:
        _finetune(tmp_path / "s", tiny_encoder, "--optimizer", "test-sgd", "--lr", "0.01")
        assert used == [0.01]
    finally:
        OPTIMIZERS.unregister("test-sgd")


def test_an_unknown_optimizer_is_refused_naming_the_registered_ones() -> None:
    from mtbio.training.config import RunConfig

    with pytest.raises(ValueError, match="unknown optimizer 'lion' \\(registered: adafactor, adamax, adamw"):
        RunConfig(optimizer="lion")


def test_an_optimizer_takes_its_own_options_from_a_config_mapping(tmp_path: Path, tiny_encoder: str) -> None:
    """`optimizer: {name: adamw, betas: [...], eps: ...}` reaches torch's AdamW, is written to config.yaml, and an
    option the optimizer does not take is refused naming it."""
    from mtbio.training.config import RunConfig
    from mtbio.training.optim import build_optimizer

    config = RunConfig(optimizer={"name": "adamw", "betas": [0.9, 0.98], "eps": 1e-6})
    name, options = config.optimizer_spec()
    optimizer = build_optimizer([{"params": [torch.nn.Parameter(torch.zeros(2))], "weight_decay": 0.0}], name, 1e-3,
                                options=options)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-6
    with pytest.raises(ValueError, match="optimizer 'adamax': betas: not an option of this optimizer"):
        RunConfig(optimizer={"name": "adamax", "betas": [0.9, 0.98]})
    own = tmp_path / "options.yml"
    own.write_text("optimizer: {name: adamw, betas: [0.9, 0.98], eps: 1.0e-6}\n")
    _finetune(tmp_path / "o", tiny_encoder, "--config", str(own))
    saved = (tmp_path / "o" / "demo-nli" / "config.yaml").read_text()
    assert "betas:\n  - 0.9\n  - 0.98" in saved and "eps: 1.0e-06" in saved
