"""Faults and bad input, round three (issue 91): cards and predictions that say which weights they are, merge's
ties and its staging, the docs' export examples, and what a contributor's components need (an optimizer's own
lookahead, a kind's own prediction keys, a span-extraction task to run)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.training.affinity import step_from
from mtbio.training.optim import build_optimizer

SAMPLES = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"


# ---- contributor finding 1: the registered optimizer owns its lookahead ----------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (4,)])
def test_adafactors_lookahead_is_the_gradients_part_of_its_update(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(*shape))
    optimizer = build_optimizer([{"params": [param], "weight_decay": 0.0}], "adafactor", 1e-2)
    for _ in range(3):
        param.grad = torch.randn(*shape)
        optimizer.step()
    grad = torch.randn(*shape)
    state = copy.deepcopy(optimizer.state[param])
    predicted = step_from(optimizer, optimizer.param_groups[0], grad, optimizer.state[param])
    assert all(not torch.is_tensor(v) or torch.equal(v, optimizer.state[param][k]) for k, v in state.items())
    before = param.detach().clone()
    param.grad = grad
    optimizer.step()
    assert torch.allclose(before - param.detach(), predicted, atol=1e-7, rtol=1e-5)


def test_affinity_runs_with_adafactor(tmp_path: Path, tiny_encoder: str) -> None:
    result = CliRunner().invoke(main, [
        "affinity", "--tasks", "demo-hoc,demo-sts", "--task-defs", str(SAMPLES / "task_defs"), "--data-dir",
        str(SAMPLES), "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "4", "--max-train-examples", "8",
        "--max-length", "32", "--seeds", "1", "--affinity-every", "1", "--affinity-batch-size", "4",
        "--optimizer", "adafactor", "--output", str(tmp_path / "aff")])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "aff" / "affinity.json").read_text())
    edges = saved["predictors"]["lookahead"]["edges"]
    assert len(edges) == 2 and all(e["score"] == e["score"] for e in edges)  # measured, not NaN
