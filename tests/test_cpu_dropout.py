"""Bit dropout: Bernoulli(1 - p) masks from 16 random bits, and the attention path that uses it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import AutoModel, BertConfig, BertModel

from mtbio.model import cpu_dropout
from mtbio.model.cpu_dropout import ATTENTION, BitDropout, bit_dropout, use_bit_dropout

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)
ROOT = Path(__file__).resolve().parents[1]


def test_bit_dropout_keeps_one_minus_p_and_rescales() -> None:
    torch.manual_seed(0)
    x = torch.full((1000, 1000), 2.0)
    out = bit_dropout(x, 0.1)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.002  # 1e6 draws: sd 0.0003
    assert torch.allclose(out[kept], torch.tensor(2.0 / 0.9))
    assert torch.equal(bit_dropout(x, 0.1, training=False), x)
    assert torch.equal(bit_dropout(x, 0.0), x)
    assert not torch.equal(bit_dropout(x, 0.1), out)  # a fresh mask each call
    torch.manual_seed(0)
    assert torch.equal(bit_dropout(x, 0.1), out)  # seeded by torch's generator


def test_keep_mask_is_the_documented_bit_stream() -> None:
    """Element i is kept where the i-th int16 of PCG64's raw words (seeded by one draw from torch's generator) is
    at least round(p * 65536) - 32768: a faster mask must draw the same one, or seeded studies change."""
    import numpy as np

    torch.manual_seed(7)
    seed = int(torch.randint(0, 2**62, (1,)))
    words = np.random.Generator(np.random.PCG64(seed)).bit_generator.random_raw(4)  # 16 int16s, 13 used
    expected = torch.tensor([int(v) >= round(0.3 * 65536) - 32768 for v in words.view(np.int16)[:13]])
    torch.manual_seed(7)
    keep = cpu_dropout.keep_mask(torch.Size((13,)), 0.3, torch.device("cpu"))
    assert keep.dtype == torch.bool and torch.equal(keep, expected)
    torch.manual_seed(7)
    x = torch.arange(1.0, 14.0, dtype=torch.bfloat16)
    assert torch.equal(bit_dropout(x, 0.3), x * expected.to(torch.bfloat16) * torch.tensor(1 / 0.7, dtype=x.dtype))


def test_attention_path_is_sdpa_up_to_the_dropout_mask() -> None:
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 2, 5, 8) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[1, :, :, 3:] = False  # the second sequence has two padded positions
    module = nn.Module().train()
    expected, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=0.0)  # no dropout: plain SDPA
    got, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=1e-9)  # the eager path, keeping all
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("heads_per_block", [2, 6])  # 2 of an example's 3 heads (the last block short), 2 examples
def test_lean_attention_gives_the_eager_paths_outputs_and_gradients(monkeypatch, precision: str,
                                                                     heads_per_block: int) -> None:
    """Above LEAN_FROM_LENGTH keys the probabilities are recomputed block by block in the backward pass (into
    buffers reused across blocks): with the same seed (so the same dropout mask) it matches the eager path, in fp32
    to rounding, under bf16 autocast to bf16's rounding. Query and key come transposed, as from a model's heads."""
    torch.manual_seed(0)
    query, key, value = (torch.randn(3, 40, 3, 8).transpose(1, 2).requires_grad_() for _ in range(3))
    mask = torch.ones(3, 1, 40, 40, dtype=torch.bool)
    mask[1, :, :, 31:] = False
    mask[2, :, 25:, :] = False  # padded query rows too
    weights = torch.randn(3, 40, 3, 8)
    module = nn.Module().train()
    monkeypatch.setattr(cpu_dropout, "BLOCK_SCORES", heads_per_block * 40 * 40)
    query_, key_ = query.detach().contiguous(), key.detach().contiguous()
    blocks = [(block.heads, block.shape, block.bias.shape) for block in cpu_dropout._blocks(query_, key_, mask)]
    # (heads of batch * heads, (examples, heads), the bias's part)
    assert blocks == ([(slice(0, 2), (1, 2), (1, 1, 40, 40)), (slice(2, 3), (1, 1), (1, 1, 40, 40)),
                       (slice(3, 5), (1, 2), (1, 1, 40, 40)), (slice(5, 6), (1, 1), (1, 1, 40, 40)),
                       (slice(6, 8), (1, 2), (1, 1, 40, 40)), (slice(8, 9), (1, 1), (1, 1, 40, 40))]
                      if heads_per_block == 2 else [(slice(0, 6), (2, 3), (2, 1, 40, 40)),
                                                    (slice(6, 9), (1, 3), (1, 1, 40, 40))])
    results = []
    for lean_from in (41, 40):  # eager, then lean
        monkeypatch.setattr(cpu_dropout, "LEAN_FROM_LENGTH", lean_from)
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=0.2)
        grads = torch.autograd.grad((out.float() * weights).sum(), (query, key, value))
        results.append((out, grads))
    (eager, eager_grads), (lean, lean_grads) = results
    undropped, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=0.0)
    assert not torch.allclose(eager.float(), undropped, atol=0.05)  # dropout happened, the same mask on both paths
    tolerance = {} if precision == "fp32" else {"atol": 0.05, "rtol": 0.02}
    assert lean.dtype == eager.dtype
    torch.testing.assert_close(lean, eager, **tolerance)
    for got, expected in zip(lean_grads, eager_grads):
        torch.testing.assert_close(got, expected, **tolerance)


@pytest.mark.long  # the benchmark's paths run in-process below (one layer); their outputs and gradients above
def test_bench_attention_times_the_paths_of_a_whole_encoder_against_a_baseline(tmp_path: Path) -> None:
    """The packaged encoder, eager against lean, with a baseline checkout's lean path (this one's, so the same code
    on both sides) in the alternation; each path's memory from a fresh process."""
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_attention.py"), "--lengths", "16", "--batch-size", "2",
               "--precisions", "fp32", "--repeats", "1", "--results-dir", str(tmp_path), "--whole-encoder",
               "--baseline-tree", str(ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "bench_attention-encoder.json").read_text())
    (row,) = result["rows"]
    assert result["unit"] == "whole encoder" and row["length"] == 16
    assert row["lean_speedup"] > 0 and row["lean_over_baseline_paired"] > 0
    assert all(row[path]["peak_above_inputs_mb"] >= 0 and len(row[path]["seconds"]) == 1
               for path in ("eager", "lean", "baseline"))
    assert "fp32 length 16: lean" in done.stdout and "the baseline's lean speed" in done.stdout


def test_bench_attention_times_one_layer_on_each_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's default unit, one attention layer, in this process (its main() is the whole-encoder test's):
    each path's step runs and gives the same forward value."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(cpu_dropout, "LEAN_FROM_LENGTH", cpu_dropout.LEAN_FROM_LENGTH)  # each step sets it
    import bench_attention

    forward = bench_attention.one_layer(2, 16)
    values = {}
    for path in ("eager", "lean"):
        assert bench_attention.step(path, forward, "fp32", None) > 0
        torch.manual_seed(1)
        values[path] = forward(bench_attention.attention_for(path, None)).item()
    assert values["lean"] == pytest.approx(values["eager"], rel=1e-5)


def test_use_bit_dropout_swaps_modules_and_saves_a_plain_encoder(tmp_path: Path) -> None:
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(**SIZES, attn_implementation="sdpa"))
    ids = torch.randint(5, 100, (2, 7))
    before = encoder.eval()(input_ids=ids).last_hidden_state
    head_dropout = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 3))
    swapped = use_bit_dropout(encoder, head_dropout)
    # embeddings; per layer: attention probabilities (its p is read), attention output, FFN output; the head
    assert swapped == 1 + 3 * 2 + 1
    assert sum(isinstance(m, BitDropout) for m in encoder.modules()) == 7
    assert encoder.config._attn_implementation == ATTENTION
    torch.testing.assert_close(encoder.eval()(input_ids=ids).last_hidden_state, before)
    encoder.train()(input_ids=ids).last_hidden_state.sum().backward()  # trains through the eager path
    encoder.save_pretrained(tmp_path)
    assert ATTENTION not in json.dumps(json.loads((tmp_path / "config.json").read_text()))
    AutoModel.from_pretrained(tmp_path)
