"""What task heads share; each kind's own head lives in its module of `mtbio.kinds`."""
from mtbio.model.heads.base import Head, HeadConfig, LinearHead, SentenceHead, build_head, output_layer, pool

__all__ = ["Head", "HeadConfig", "LinearHead", "SentenceHead", "build_head", "output_layer", "pool"]
