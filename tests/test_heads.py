"""Sentence-level heads read [CLS] or the encoder's pooler; `pooler` reproduces AutoModelForSequenceClassification."""
from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel, DebertaV2Config, DebertaV2Model

from mtbio.errors import MtbioError
from mtbio.model.heads import HeadConfig, build_head
from mtbio.model.multitask import MultiTaskModel

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 100, (3, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[2, 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _model(pooling: str, encoder: torch.nn.Module | None = None) -> MultiTaskModel:
    torch.manual_seed(0)
    encoder = encoder if encoder is not None else BertModel(BertConfig(**SIZES))
    config = HeadConfig(task="t", type="classification", hidden_size=32, labels=["a", "b", "c"], dropout=0.0,
                        pooling=pooling)
    return MultiTaskModel(encoder, {"t": build_head(config)}).eval()


def test_cls_pooling_reads_the_first_hidden_state() -> None:
    model, batch = _model("cls"), _batch()
    head = model.heads["t"]
    with torch.no_grad():
        hidden = model.encoder(**batch).last_hidden_state
        expected = hidden[:, 0] @ head.out.weight.T + head.out.bias
        assert torch.allclose(model("t", **batch).logits, expected, atol=1e-6)


def test_pooler_pooling_gives_the_logits_of_auto_model_for_sequence_classification() -> None:
    model, batch = _model("pooler"), _batch()
    reference = BertForSequenceClassification(BertConfig(**SIZES, num_labels=3)).eval()
    reference.bert.load_state_dict(model.encoder.state_dict())
    reference.classifier.load_state_dict(model.heads["t"].out.state_dict())
    with torch.no_grad():
        ours, theirs = model("t", **batch).logits, reference(**batch).logits
        cls_only = _model("cls")("t", **batch).logits
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert not torch.allclose(ours, cls_only, atol=1e-3)  # the pooler is really in the path


@pytest.mark.parametrize("encoder_factory", [lambda: DebertaV2Model(DebertaV2Config(**SIZES)),
                                             lambda: BertModel(BertConfig(**SIZES), add_pooling_layer=False)])
def test_pooler_pooling_without_a_pooler_fails_when_the_model_is_built(encoder_factory) -> None:
    with pytest.raises(MtbioError, match="task 't' sets pooling: pooler, but this encoder .* has no pooler"):
        _model("pooler", encoder_factory())  # no forward pass needed: the model refuses to assemble


def test_a_head_config_with_an_unknown_pooling_is_refused() -> None:
    data = HeadConfig(task="t", type="classification", hidden_size=32, labels=["a", "b"]).to_json()
    assert HeadConfig.from_json(data).pooling == "cls"
    assert HeadConfig.from_json({**data, "pooling": "mean"}).pooling == "mean"
    with pytest.raises(ValueError, match="pooling must be one of cls, mean, pooler, not 'max'"):
        HeadConfig.from_json({**data, "pooling": "max"})


@pytest.mark.parametrize("head_type, labels", [("classification", ["a", "b"]), ("regression", []),
                                               ("multilabel", ["x", "y", "z"]), ("tagging", ["O", "B-C", "I-C"])])
def test_heads_start_as_bert_task_heads_do(head_type: str, labels: list[str]) -> None:
    torch.manual_seed(0)
    head = build_head(HeadConfig(task="t", type=head_type, hidden_size=1024, labels=labels))
    assert torch.equal(head.out.bias, torch.zeros_like(head.out.bias))
    weight = head.out.weight.detach()
    assert abs(float(weight.std()) - 0.02) < 0.002 and abs(float(weight.mean())) < 0.002
