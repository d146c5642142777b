"""The head of the `tagging` kind (`mtbio.kinds.tagging`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.data.featurize import decode_tags
from mtbio.model.heads import LinearHead


class TaggingHead(LinearHead):
    packable = True

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return self.classify(hidden)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)

    def loss_units(self, label: Any) -> int:
        return sum(1 for tag in label if tag != -100)  # the loss averages over labelled first sub-words

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        predicted = logits.argmax(-1).tolist()
        word_index = batch["word_index"].tolist()
        n_words = batch["n_words"].tolist()
        return [decode_tags(p, w, n, self.config.labels) for p, w, n in zip(predicted, word_index, n_words)]

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Per word, the softmax probability of its predicted tag (from its first sub-word; 1.0 for a
        word that lost every sub-word to truncation and is tagged `O`)."""
        best = torch.softmax(logits.float(), -1).max(-1).values.tolist()
        out = []
        for probs, index, n in zip(best, batch["word_index"].tolist(), batch["n_words"].tolist()):
            words = [1.0] * n
            for token, word in enumerate(index):
                if word >= 0:
                    words[word] = probs[token]
            out.append(words)
        return out
