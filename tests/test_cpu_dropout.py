"""Bit dropout: Bernoulli(1 - p) masks from 16 random bits, and the attention path that uses it."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModel, BertConfig, BertModel

from mtbio.model import cpu_dropout
from mtbio.model.cpu_dropout import ATTENTION, BitDropout, bit_dropout, use_bit_dropout

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)


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


def test_attention_path_is_sdpa_up_to_the_dropout_mask() -> None:
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 2, 5, 8) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[1, :, :, 3:] = False  # the second sequence has two padded positions
    module = nn.Module().train()
    expected, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=0.0)  # no dropout: plain SDPA
    got, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=1e-9)  # the eager path, keeping all
    torch.testing.assert_close(got, expected)


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
