"""`--l2sp`: the encoder pulled toward its starting weights after every step (decoupled L2-SP)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from mtbio.cli import main
from mtbio.training.events import Flow
from mtbio.training.l2sp import AnchorToStart


def test_one_step_moves_each_weight_by_lr_alpha_times_its_distance_from_the_start() -> None:
    encoder = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        encoder.weight.copy_(torch.tensor([[1.0, 2.0]]))
    anchor = AnchorToStart(encoder, alpha=2.0)
    with torch.no_grad():
        encoder.weight.copy_(torch.tensor([[3.0, 2.0]]))
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
    anchor.on_step_end(SimpleNamespace(raw_optimizer=optimizer), Flow())
    assert torch.allclose(encoder.weight, torch.tensor([[2.6, 2.0]]))  # 3 − 0.1·2·(3 − 1); the other stays
    assert abs(anchor.distance(encoder) - 1.6) < 1e-6


def _distance(run: Path, start: str) -> float:
    before, after = load_file(str(Path(start) / "model.safetensors")), load_file(str(run / "encoder" / "model.safetensors"))
    keys = [k for k in after if k in before and after[k].is_floating_point()]
    assert keys
    return float(sum(float((after[k] - before[k]).pow(2).sum()) for k in keys) ** 0.5)


def test_an_anchored_run_ends_nearer_its_starting_encoder(tmp_path: Path, micro_encoder: str,
                                                          keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    distances = {}
    for alpha in ("0", "40"):
        out = tmp_path / f"l2sp-{alpha}"
        result = CliRunner().invoke(main, ["refine", "--tasks", "kw-all,kw-noise", "--task-defs", defs, "--data-dir",
                                           data, "--encoder", micro_encoder, "--epochs", "1", "--batch-size", "8",
                                           "--lr", "5e-3", "--l2sp", alpha, "--output", str(out)])
        assert result.exit_code == 0, result.output
        distances[alpha] = _distance(out, micro_encoder)
    assert distances["40"] < 0.5 * distances["0"], distances
