"""Learning-rate schedules are registered components (issue 66): one file each, `--schedule NAME`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.training.config import RunConfig
from mtbio.training.optim import build_scheduler
from mtbio.training.schedules import SCHEDULES, register_schedule


def _factors(scheduler: torch.optim.lr_scheduler.LRScheduler, steps: int) -> list[float]:
    found = []
    for _ in range(steps):
        found.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return found


def _sgd() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)


def test_cosine_and_constant_are_transformers_schedules() -> None:
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    for total, ratio in ((10, 0.1), (25, 0.5), (7, 0.0)):
        warmup = int(round(total * ratio))
        ours = _factors(build_scheduler(_sgd(), total, ratio, "cosine"), total + 2)
        theirs = _factors(get_cosine_schedule_with_warmup(_sgd(), warmup, total), total + 2)
        assert ours == pytest.approx(theirs, abs=1e-12), (total, ratio)
        ours = _factors(build_scheduler(_sgd(), total, ratio, "constant"), total + 2)
        assert ours == pytest.approx(_factors(get_constant_schedule_with_warmup(_sgd(), warmup), total + 2))


def test_a_new_schedule_is_one_registration_and_trains_through_the_flag(tmp_path: Path, tiny_encoder: str) -> None:
    """ARCHITECTURE.md's "Add a schedule": a factor function registered under a name trains through --schedule, and
    config.yaml records it."""
    register_schedule("test-halved")(lambda step, warmup, total: 0.5)
    try:
        result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                           "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps",
                                           "2", "--batch-size", "8", "--no-baselines", "--schedule", "test-halved",
                                           "--lr", "1e-3", "--log-every", "1", "--output", str(tmp_path / "r")])
        assert result.exit_code == 0, result.output
        assert "schedule: test-halved" in (tmp_path / "r" / "demo-nli" / "config.yaml").read_text()
        rates = [json.loads(line).get("lr") for line in (tmp_path / "r" / "demo-nli" / "metrics.jsonl").read_text()
                 .splitlines() if json.loads(line).get("split") == "train"]
        assert rates and all(rate == pytest.approx(5e-4) for rate in rates if rate is not None)
    finally:
        SCHEDULES.unregister("test-halved")


def test_an_unknown_schedule_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ValueError, match="unknown schedule 'step' \\(registered: constant, cosine, linear"):
        RunConfig(schedule="step")
