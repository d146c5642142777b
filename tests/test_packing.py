"""Sequence packing: packed rows give every token the hidden state it has unpacked (a packed run
training exactly as the same random batches unpacked is in test_exact_batching.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel, DebertaV2Config, DebertaV2Model, ElectraConfig, ElectraModel, RobertaConfig, RobertaModel

from mtbio.data.mixer import padding_fraction
from mtbio.data.packing import collate_packed, first_fit_decreasing
from mtbio.model import packing as model_packing
from mtbio.model.packing import packing_error, position_offset

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)
FAMILIES = {
    "bert": (BertConfig, BertModel, {}),
    "roberta": (RobertaConfig, RobertaModel, {"pad_token_id": 1}),
    "electra": (ElectraConfig, ElectraModel, {"embedding_size": 16}),
}


def test_first_fit_decreasing_by_hand() -> None:
    # longest first: 5 opens row 0, 4 row 1, 3 row 2 (no room left in rows 0 and 1), 2 joins row 2
    assert first_fit_decreasing([5, 3, 2, 4]) == [[0], [3], [1, 2]]
    assert first_fit_decreasing([5, 3, 2, 4], capacity=7) == [[0, 2], [3, 1]]
    with pytest.raises(ValueError, match="does not fit"):
        first_fit_decreasing([9], capacity=8)


def test_collate_packed_by_hand() -> None:
    rows = [{"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 0], "labels": [-100, 1, -100]},
            {"input_ids": [101, 8, 9, 102], "token_type_ids": [0, 0, 0, 0], "labels": [-100, 2, 0, -100]},
            {"input_ids": [101, 102], "token_type_ids": [0, 0], "labels": [-100, -100]}]
    batch = collate_packed(rows, pad_token_id=0, position_offset=2)
    # capacity 4 (the longest): row 0 = example 1; row 1 = example 0 (3) … example 2 (2) does not fit → row 2
    assert batch["input_ids"].tolist() == [[101, 8, 9, 102], [101, 7, 102, 0], [101, 102, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 2, 0, -100], [-100, 1, -100, -100], [-100] * 4]
    assert batch["position_ids"].tolist() == [[2, 3, 4, 5], [2, 3, 4, 0], [2, 3, 0, 0]]  # padding: 0
    two = collate_packed(rows[1:], pad_token_id=0, capacity=6)  # both in one row: 4 + 2 tokens
    assert two["input_ids"].tolist() == [[101, 8, 9, 102, 101, 102]]
    assert two["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1]]
    expected = torch.zeros(6, 6, dtype=torch.bool)
    expected[:4, :4] = True
    expected[4:, 4:] = True
    assert torch.equal(two["attention_mask"][0, 0], expected)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_packed_rows_match_single_sentences(family: str, attention: str) -> None:
    config_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = config_cls(**SIZES, **extra)
    config._attn_implementation = attention
    encoder = model_cls(config)
    assert position_offset(encoder) == (2 if family == "roberta" else 0)
    assert packing_error(encoder, pad_token_id=int(config.pad_token_id or 0)) is None


def test_packing_check_refuses_deberta_v2() -> None:
    # DeBERTa-v2 expands its own 2D mask (and multiplies embeddings by it): no 4D masks, so no packing
    torch.manual_seed(0)
    encoder = DebertaV2Model(DebertaV2Config(**SIZES, relative_attention=True, pos_att_type=["p2c", "c2p"]))
    assert packing_error(encoder, pad_token_id=0) is not None


def test_packing_check_catches_wrong_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    encoder = RobertaModel(RobertaConfig(**SIZES, pad_token_id=1))
    monkeypatch.setattr(model_packing, "position_offset", lambda _encoder: 0)  # BERT's positions on RoBERTa
    error = packing_error(encoder, pad_token_id=1)
    assert error is not None and "differ" in error


def test_packed_padding_is_small_on_random_ner_batches(data_dir: Path) -> None:
    from mtbio.data.loading import read_split
    from mtbio.tasks.loading import load_catalog

    examples = read_split(load_catalog().get("bc5cdr-chem"), "dev", data_dir)[:640]
    lengths = {"ner": [len(ex.tokens) + 2 for ex in examples]}  # words + [CLS]/[SEP], a lower bound on tokens
    batches = [("ner", list(range(i, i + 32))) for i in range(0, 640, 32)]  # file order: random lengths
    assert padding_fraction(batches, lengths) > 0.4
    assert padding_fraction(batches, lengths, packed={"ner"}) < 0.12

