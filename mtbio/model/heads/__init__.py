"""Task heads, one module per type; importing this package registers them all."""
from mtbio.model.heads import classification, multilabel, regression, tagging  # noqa: F401
from mtbio.model.heads.base import HEADS, Head, HeadConfig, build_head

__all__ = ["HEADS", "Head", "HeadConfig", "build_head"]
