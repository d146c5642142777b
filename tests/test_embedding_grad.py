"""The word embeddings' reused gradient buffer: torch's gradients to the bit, one buffer across steps."""
from __future__ import annotations

import copy

import torch
from transformers import BertConfig, BertModel

from mtbio.model.embedding_grad import reuse_embedding_grad

SIZES = dict(vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0)


def pair() -> tuple[BertModel, BertModel]:
    torch.manual_seed(0)
    plain = BertModel(BertConfig(**SIZES)).train()
    reusing = copy.deepcopy(plain)
    assert reuse_embedding_grad(reusing)
    return plain, reusing


def backward(model: BertModel, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 40, (3, 12), generator=generator)  # a small vocabulary slice: repeated ids
    ids[1, 9:] = 0  # padding, whose embedding row gets no gradient
    out = model(input_ids=ids).last_hidden_state
    (out * torch.randn(out.shape, generator=generator)).sum().backward()


def test_same_gradients_as_torch_and_one_buffer_across_steps() -> None:
    plain, reusing = pair()
    buffers = set()
    for step in range(3):
        backward(plain, step)
        backward(reusing, step)
        grad = reusing.get_input_embeddings().weight.grad
        assert torch.equal(grad, plain.get_input_embeddings().weight.grad)
        assert grad[0].abs().sum() == 0 and grad[1:40].abs().sum() > 0
        others = dict(reusing.named_parameters())
        for name, p in plain.named_parameters():
            assert (p.grad is None and others[name].grad is None) or torch.equal(p.grad, others[name].grad), name
        buffers.add(grad.data_ptr())
        del grad  # a gradient still referenced elsewhere is copied, not reused
        for model in (plain, reusing):
            model.zero_grad(set_to_none=True)
    assert len(buffers) == 1  # the freed gradient came back as the next one


def test_accumulation_and_zeroing_in_place_stay_correct() -> None:
    plain, reusing = pair()
    for model in (plain, reusing):
        backward(model, 1)
        backward(model, 2)  # two backward passes add up
    weight = reusing.get_input_embeddings().weight
    assert torch.equal(weight.grad, plain.get_input_embeddings().weight.grad)
    for model in (plain, reusing):
        model.zero_grad(set_to_none=False)
        backward(model, 3)
    assert torch.equal(weight.grad, plain.get_input_embeddings().weight.grad)


def test_autograd_grad_frozen_and_no_grad_fall_back() -> None:
    plain, reusing = pair()
    ids = torch.tensor([[3, 4, 5, 0]])
    found = [torch.autograd.grad(m(input_ids=ids).last_hidden_state.sum(), m.get_input_embeddings().weight)[0]
             for m in (plain, reusing)]
    assert torch.equal(found[0], found[1]) and reusing.get_input_embeddings().weight.grad is None
    with torch.no_grad():
        assert torch.equal(plain(input_ids=ids).last_hidden_state, reusing(input_ids=ids).last_hidden_state)
    reusing.get_input_embeddings().weight.requires_grad_(False)
    reusing(input_ids=ids).last_hidden_state.sum().backward()
    assert reusing.get_input_embeddings().weight.grad is None
    assert set(reusing.state_dict()) == set(plain.state_dict())
    assert not reuse_embedding_grad(reusing)  # once per model
    plain.get_input_embeddings().weight.requires_grad_(False)
    assert not reuse_embedding_grad(plain)  # frozen (LoRA): nothing to reuse
