"""A regression of two texts through the cosine of the texts encoded on their own (a bi-encoder regression): each
text pooled (mean over its tokens by default), their cosine one feature, a linear layer from it to the score, MSE on
the labels as they are.

The one-feature model is the no-training `cosine-mean` baseline's (a linear regression on the cosine), so `--lp-ft`
starts fine-tuning exactly at the encoder's zero-shot cosine, scaled onto the labels' range by that affine fit;
`--pair-form auto` trains a regression of two texts so where the cosine's probe beats the cross-encoder's on the
training pairs. Unlike `bi_encoder` it needs no `label_range`. Labels, the trivial predictor and the metrics are
regression's. `type_options: {pooling: mean|cls}`. Served by `mtbio predict`; no `AutoModelFor*` carries the head.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mtbio.kinds.cosine_classification import CosineClassificationOptions, CosinePair
from mtbio.kinds.regression import Regression
from mtbio.tasks.kinds import register_kind

if TYPE_CHECKING:
    from mtbio.kinds.heads.cosine_regression import CosineRegressionHead
    from mtbio.model.heads import HeadConfig


@register_kind
class CosineRegression(CosinePair, Regression):
    """Regression's labels, metrics and trivial predictor; its own features and head."""

    name = "cosine_regression"

    def head(self, config: HeadConfig) -> CosineRegressionHead:
        from mtbio.kinds.heads.cosine_regression import CosineRegressionHead

        return CosineRegressionHead(config, CosineClassificationOptions.model_validate(config.type_options).pooling)
