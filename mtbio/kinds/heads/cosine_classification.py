"""The head of the `cosine_classification` kind (`mtbio.kinds.cosine_classification`), imported when a run builds one."""
from __future__ import annotations

from mtbio.kinds.heads.bi_encoder import CosineFeatureHead
from mtbio.kinds.heads.classification import ClassificationHead


class CosineClassifierHead(CosineFeatureHead, ClassificationHead):
    """cos(pool(text), pool(text_b)) → linear → class logits."""
