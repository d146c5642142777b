"""--tagging-loss: per-token weighs every token the same whatever the length of its batch's sentences."""
from __future__ import annotations

import pytest
import torch

from mtbio.data.pipeline import SplitData
from mtbio.model.heads import HeadConfig, build_head
from mtbio.training.trainer import labelled_tokens_per_example, per_token_loss


def _token_gradients(labels: torch.Tensor, per_token: bool, labelled_per_example: float) -> torch.Tensor:
    """Gradient of the batch loss on each labelled token's logits (all logits equal, so all token losses equal)."""
    head = build_head(HeadConfig(task="t", type="tagging", hidden_size=4, labels=["O", "B-X", "I-X"]))
    logits = torch.zeros(*labels.shape, 3, requires_grad=True)
    loss = head.loss(logits, labels)
    if per_token:
        loss = per_token_loss(loss, labels, labels.shape[0], labelled_per_example)
    loss.backward()
    return logits.grad[labels != -100].norm(dim=-1)


def _labels(n_examples: int, labelled: int, padded_to: int) -> torch.Tensor:
    labels = torch.full((n_examples, padded_to), -100)
    labels[:, 1 : labelled + 1] = 0  # [CLS] and padding ignored
    return labels


@pytest.mark.parametrize("per_token", [True, False])
def test_a_token_weighs_the_same_in_short_and_long_batches_only_per_token(per_token: bool) -> None:
    short, long = _labels(2, 3, 12), _labels(2, 9, 12)  # mean labelled tokens per example: 6
    g_short, g_long = _token_gradients(short, per_token, 6.0), _token_gradients(long, per_token, 6.0)
    ratio = float(g_short[0] / g_long[0])
    assert ratio == pytest.approx(1.0 if per_token else 3.0)  # batch-mean: a short batch's token weighs 9/3 more


def test_per_token_loss_is_the_token_sum_over_the_mean_tokens_per_batch() -> None:
    labels = _labels(2, 3, 8)
    logits = torch.randn(2, 8, 3, generator=torch.Generator().manual_seed(0))
    token_losses = torch.nn.functional.cross_entropy(logits[labels != -100], labels[labels != -100], reduction="none")
    mean = token_losses.mean()
    assert per_token_loss(mean, labels, 2, 6.0) == pytest.approx(float(token_losses.sum() / (6.0 * 2)))


def test_labelled_tokens_per_example_counts_first_sub_words_only() -> None:
    split = SplitData(examples=[], columns={"labels": [[-100, 0, 1, -100, -100], [-100, 2, -100]]})
    assert labelled_tokens_per_example(split) == pytest.approx(1.5)
