"""The head of the `classification` kind (`mtbio.kinds.classification`), imported when a run builds one."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from mtbio.errors import MtbioError
from mtbio.model.heads import SentenceHead


def fit_negative_threshold(negative: Sequence[float], best: Sequence[int], best_probability: Sequence[float],
                           gold: Sequence[int], negative_index: int) -> float | None:
    """The threshold on the negative class's probability with the best micro F1 of the positive classes over the
    examples, when it beats the argmax rule: an example is predicted negative when its probability reaches the
    threshold, else its most probable positive class (`best`). Candidates are the midpoints between consecutive
    distinct probabilities and the two ends (every example negative, every example positive); ties go to the lower
    threshold (fewer positives). None: the argmax rule is at least as good, or nothing is positive."""
    p, best_class, truth = np.asarray(negative, float), np.asarray(best), np.asarray(gold)
    actual = int((truth != negative_index).sum())
    if not actual or not len(p):
        return None
    order = np.argsort(p, kind="stable")
    p, correct = p[order], (best_class[order] == truth[order])
    true = np.concatenate([[0], np.cumsum(correct)])  # tp when the k lowest are predicted positive
    ks = [0, *[k for k in range(1, len(p)) if p[k] > p[k - 1]], len(p)]
    f1 = [2 * int(true[k]) / (k + actual) for k in ks]
    k = ks[int(np.argmax(f1))]
    argmax = np.asarray(best_probability, float) > np.asarray(negative, float)  # the argmax rule predicts positive
    argmax_f1 = 2 * int((argmax & (best_class == truth)).sum()) / (int(argmax.sum()) + actual)
    if max(f1) <= argmax_f1:
        return None
    return float(p[0] / 2 if k == 0 else (1 + p[-1]) / 2 if k == len(p) else (p[k - 1] + p[k]) / 2)


class ClassificationHead(SentenceHead):
    @property
    def fits_decision(self) -> bool:  # type: ignore[override]
        """A task whose metric leaves its negative class out fits that class's threshold (--thresholds fit)."""
        return bool(self.config.negative)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.float(), labels)

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        labels = self.config.labels
        if not (self.config.negative and self.config.thresholds):
            return [labels[i] for i in logits.argmax(-1).tolist()]
        negative = labels.index(self.config.negative)
        probabilities = torch.softmax(logits.float(), -1)
        positives = probabilities.clone()
        positives[:, negative] = -1.0
        best = positives.argmax(-1)
        chosen = torch.where(probabilities[:, negative] >= self.config.thresholds[0], negative, best)
        return [labels[i] for i in chosen.tolist()]

    def fit_decision(self, scores: list[Any], gold: list[Any]) -> None:
        """The negative class's threshold from the training examples' probabilities (`scores`) and classes (`gold`);
        none where the argmax rule is as good."""
        labels, negative = self.config.labels, self.config.negative
        kept = [(s, labels.index(g)) for s, g in zip(scores, gold) if s is not None and g in labels]
        best = [max((name for name in labels if name != negative), key=lambda name: s[name]) for s, _ in kept]
        found = fit_negative_threshold([s[negative] for s, _ in kept], [labels.index(b) for b in best],
                                       [s[b] for (s, _), b in zip(kept, best)], [g for _, g in kept],
                                       labels.index(negative))
        self.config = replace(self.config, thresholds=[found] if found is not None else [])

    def export_layer(self) -> nn.Linear:
        """With a fitted threshold t on two classes, the negative class's bias lowered by log(t / (1 − t)): the
        argmax of the export then decides as the run does. More classes: refused, no bias does it."""
        if not (self.config.negative and self.config.thresholds):
            return self.out  # type: ignore[return-value]
        t, labels = self.config.thresholds[0], self.config.labels
        if len(labels) != 2 or not 0 < t < 1:
            raise MtbioError(f"task '{self.config.task}': its head predicts '{self.config.negative}' only above a "
                             f"fitted probability ({t:.4f}) among {len(labels)} classes, which no argmax over "
                             "shifted logits reproduces; serve it with mtbio predict or mtbio.load")
        layer = nn.Linear(self.out.in_features, self.out.out_features)
        layer.load_state_dict(self.out.state_dict())
        with torch.no_grad():
            layer.bias[labels.index(self.config.negative)] -= math.log(t / (1 - t))
        return layer

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Softmax probability of every label."""
        labels = self.config.labels
        return [dict(zip(labels, row)) for row in torch.softmax(logits.float(), -1).tolist()]
