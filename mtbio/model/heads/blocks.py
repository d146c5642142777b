"""Classifier blocks: the layers an encoder family's `AutoModelFor*` classes put between the encoder and the
classifier (ModernBERT's `head`: dense → activation → LayerNorm). A head of an exportable kind on such an encoder
trains the same block before its dropout and linear layer, so its export is that class exactly.

A family is one `register_block` call: the encoder-config values the block needs, how to build it from them, the
child module of the `AutoModelFor*` class it becomes, and the config field that makes that class pool as the head
does. BERT-like families have no entry (their classifier reads the pooled vector directly).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn


@dataclass(frozen=True)
class Block:
    """One family's block: `settings` reads what `build` needs from the encoder's config; `child` is its name in
    the `AutoModelFor*` class; `pooling_field` the config field naming that class's pooling (cls / mean)."""

    settings: Callable[[Any], dict[str, Any]]
    build: Callable[[dict[str, Any]], nn.Module]
    child: str
    pooling_field: str | None = None


BLOCKS: dict[str, Block] = {}


def register_block(model_type: str, block: Block) -> None:
    BLOCKS[model_type] = block


def block_spec(encoder_config: Any) -> dict[str, Any]:
    """What a head on this encoder records to rebuild its block ({} for a family without one)."""
    family = str(getattr(encoder_config, "model_type", ""))
    if family not in BLOCKS:
        return {}
    return {"family": family, **BLOCKS[family].settings(encoder_config)}


def family_block(spec: dict[str, Any]) -> Block:
    return BLOCKS[spec["family"]]


def build_block(spec: dict[str, Any]) -> nn.Module:
    """The block a head's recorded spec describes; identity for an empty spec."""
    if not spec:
        return nn.Identity()
    settings = {key: value for key, value in spec.items() if key != "family"}
    return family_block(spec).build(settings)


def _modernbert(settings: dict[str, Any]) -> nn.Module:
    from transformers import ModernBertConfig
    from transformers.models.modernbert.modeling_modernbert import ModernBertPredictionHead

    return ModernBertPredictionHead(ModernBertConfig(**settings))


register_block("modernbert", Block(
    settings=lambda c: {key: getattr(c, key) for key in ("hidden_size", "classifier_bias", "classifier_activation",
                                                          "norm_eps", "norm_bias")},
    build=_modernbert, child="head", pooling_field="classifier_pooling"))
