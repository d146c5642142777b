"""Fused query/key/value projections: the same outputs and gradients as three, the same parameters."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

from mtbio.model.cpu_dropout import use_bit_dropout
from mtbio.model.fused_qkv import fuse_qkv

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def outputs_and_gradients(model: torch.nn.Module) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    return out.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model_class, config_class, attention", [
    (BertModel, BertConfig, "sdpa"), (RobertaModel, RobertaConfig, "sdpa"), (BertModel, BertConfig, "mtbio")])
def test_fused_projections_give_the_same_outputs_and_gradients(model_class, config_class, attention: str) -> None:
    torch.manual_seed(0)
    plain = model_class(config_class(**SIZES, attn_implementation="sdpa")).train()
    if attention == "mtbio":  # mtbio's CPU training attention (bit dropout; p = 0 here)
        use_bit_dropout(plain)
    fused = copy.deepcopy(plain)
    assert fuse_qkv(fused) == 3
    assert fuse_qkv(fused) == 0  # already fused
    assert list(fused.state_dict()) == list(plain.state_dict())
    expected, expected_grads = outputs_and_gradients(plain)
    got, grads = outputs_and_gradients(fused)
    assert torch.allclose(got, expected, atol=1e-5)
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        assert torch.allclose(grad, expected_grads[name], atol=1e-5), name


def test_eager_attention_and_wrapped_projections_keep_their_own_forward() -> None:
    torch.manual_seed(0)
    plain = BertModel(BertConfig(**SIZES, attn_implementation="eager")).eval()
    fused = copy.deepcopy(plain)
    fuse_qkv(fused)
    calls = []
    layer = fused.encoder.layer[0].attention.self
    original = type(layer).forward
    layer_class = type(layer)
    try:
        layer_class.forward = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
        ids = torch.tensor([[5, 6, 7]])
        assert torch.allclose(fused(input_ids=ids).last_hidden_state, plain(input_ids=ids).last_hidden_state)
        assert calls  # the eager path is the model's own
    finally:
        layer_class.forward = original
    # a projection wrapped after fusing (an adapter, say) is not fused over: the wrapper's output counts
    sdpa = BertModel(BertConfig(**SIZES, attn_implementation="sdpa")).eval()
    reference = copy.deepcopy(sdpa)
    fuse_qkv(sdpa)
    for model in (sdpa, reference):
        model.encoder.layer[0].attention.self.query = Shifted(model.encoder.layer[0].attention.self.query)
    ids = torch.tensor([[5, 6, 7]])
    assert torch.allclose(sdpa(input_ids=ids).last_hidden_state, reference(input_ids=ids).last_hidden_state,
                          atol=1e-6)


class Shifted(torch.nn.Module):
    """A stand-in adapter: the wrapped projection's output plus one."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 1.0


def test_bench_fused_qkv_times_both_settings(tiny_encoder: str, tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fused_qkv.py"
    done = subprocess.run([sys.executable, str(script), "--encoder", tiny_encoder, "--widths", "8,16",
                           "--precisions", "no", "--repeats", "2", "--batch-size", "2", "--results-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "bench_fused_qkv.json").read_text())
    assert result["fused_layers"] >= 1 and [c["width"] for c in result["cases"]] == [8, 16]
    for case in result["cases"]:
        assert len(case["seconds"]["fused"]) == len(case["seconds"]["separate"]) == 2
        assert case["speedup"] == case["median_separate"] / case["median_fused"]
