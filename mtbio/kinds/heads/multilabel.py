"""The head of the `multilabel` kind (`mtbio.kinds.multilabel`), imported when a run builds one."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from mtbio.model.heads import SentenceHead


def fit_thresholds(probabilities: Sequence[Sequence[float]], gold: Sequence[Sequence[bool]],
                   default: float = 0.5) -> list[float]:
    """Per label, the threshold with the best F1 over the examples: candidates are the midpoints between
    consecutive distinct probabilities (and `default`), ties go to the one nearest `default` (then the first); a label
    without a positive example keeps `default`. Counts above each candidate come from sorted probabilities, so a
    label costs O(n log n)."""
    scores, hot = np.asarray(probabilities, dtype=float), np.asarray(gold, dtype=bool)
    out = []
    for j in range(hot.shape[1] if hot.ndim == 2 else 0):
        actual = int(hot[:, j].sum())
        if not actual:
            out.append(default)
            continue
        values = np.unique(scores[:, j])
        candidates = [default, *((values[:-1] + values[1:]) / 2).tolist()]
        everyone, positives = np.sort(scores[:, j]), np.sort(scores[hot[:, j], j])
        predicted = len(everyone) - np.searchsorted(everyone, candidates, side="right")
        true = actual - np.searchsorted(positives, candidates, side="right")
        f1 = [2 * int(tp) / (int(n) + actual) for tp, n in zip(true, predicted)]
        out.append(max(zip(candidates, f1), key=lambda item: (item[1], -abs(item[0] - default)))[0])
    return out


class MultiLabelHead(SentenceHead):
    fits_decision = True

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float())

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        labels = self.config.labels
        cut = torch.tensor(self.config.thresholds or [self.config.threshold] * len(labels), device=logits.device)
        positive = torch.sigmoid(logits.float()) > cut
        return [[labels[j] for j in row.nonzero().flatten().tolist()] for row in positive]

    def fit_decision(self, scores: list[Any], gold: list[Any]) -> None:
        """Per-label thresholds from the training examples' probabilities (`scores`) and label sets (`gold`)."""
        labels = self.config.labels
        kept = [(s, g) for s, g in zip(scores, gold) if s is not None and g is not None]
        probabilities = [[s[name] for name in labels] for s, _ in kept]
        hot = [[name in (g if isinstance(g, list) else [g]) for name in labels] for _, g in kept]
        self.config = replace(self.config, thresholds=fit_thresholds(probabilities, hot, self.config.threshold))

    def export_layer(self) -> nn.Linear:
        """The classifier with each label's threshold folded into its bias: sigmoid(z − logit t) > 0.5 exactly when
        sigmoid(z) > t, so a standard 0.5 threshold on the export decides as the run does."""
        layer = nn.Linear(self.out.in_features, self.out.out_features)
        layer.load_state_dict(self.out.state_dict())
        cuts = self.config.thresholds or [self.config.threshold] * self.out.out_features
        with torch.no_grad():
            layer.bias.sub_(torch.tensor([math.log(t / (1 - t)) for t in cuts], dtype=layer.bias.dtype))
        return layer

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Sigmoid probability of every label (a label is predicted above the task's threshold)."""
        labels = self.config.labels
        return [dict(zip(labels, row)) for row in torch.sigmoid(logits.float()).tolist()]
