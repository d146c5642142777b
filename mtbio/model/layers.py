"""Finding an encoder's embeddings and its stack of transformer layers by structure, not by name.

Works for every `AutoModel` encoder whose layers are one `nn.ModuleList` of identical blocks
(BERT, RoBERTa, DeBERTa-v2/v3, ELECTRA, …): the layer list is the largest such list, and its
length must equal `config.num_hidden_layers`. Architectures that share one block across
layers (ALBERT) or have no such list are refused with an `MtbioError`.

Every encoder parameter gets a *depth*: 0 for the embedding stage (the module holding
`get_input_embeddings()`, and anything that runs before the first layer, e.g. ELECTRA's
embedding projection or DeBERTa's relative-position embeddings), `l` for layer `l` (1 = lowest,
L = top), 1 for a module run between layers (DeBERTa's convolution after the first layer) and L
for whatever runs after the top layer (a pooler). The order comes from one tiny forward pass.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from mtbio.errors import MtbioError


@dataclass
class EncoderLayout:
    """Where the parts of an encoder are; `container.<attr>` is the layer list."""

    layers: nn.ModuleList
    container: nn.Module
    attr: str
    depth: dict[str, int]  # parameter name (relative to the encoder) → depth 0..L

    @property
    def num_layers(self) -> int:
        return len(self.layers)


def _model_name(encoder: nn.Module) -> str:
    config = getattr(encoder, "config", None)
    return str(getattr(config, "model_type", None) or type(encoder).__name__)


def find_layer_list(encoder: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """The largest `nn.ModuleList` of blocks of one class: (parent module, attribute name, list)."""
    best: tuple[nn.Module, str, nn.ModuleList] | None = None
    for parent in encoder.modules():
        for attr, child in parent.named_children():
            if not isinstance(child, nn.ModuleList) or len(child) == 0:
                continue
            if len({type(block) for block in child}) != 1:
                continue
            if best is None or len(child) > len(best[2]):
                best = (parent, attr, child)
    expected = getattr(getattr(encoder, "config", None), "num_hidden_layers", None)
    if best is None or (expected is not None and len(best[2]) != int(expected)):
        found = "no list of identical blocks" if best is None else f"a list of {len(best[2])} blocks"
        raise MtbioError(f"encoder '{_model_name(encoder)}' is not supported by the layer options: expected one list of "
                         f"{expected} identical transformer layers, found {found}")
    return best


def _forward_phases(encoder: nn.Module, layers: nn.ModuleList) -> dict[str, str]:
    """For each module outside the layers that runs: 'before' the first layer, 'inside' the stack, or 'after' it.

    One forward pass on a 4-token input in eval mode without gradients; the RNG is untouched.
    """
    names = {id(m): n for n, m in encoder.named_modules()}
    layer_ids = {id(m) for block in layers for m in block.modules()}
    phases: dict[str, str] = {}
    current = {"phase": "before"}

    def record(module: nn.Module, _args: object) -> None:
        phases.setdefault(names[id(module)], current["phase"])

    def enter_first(_module: nn.Module, _args: object) -> None:
        current["phase"] = "inside"

    def leave_last(_module: nn.Module, _args: object, _output: object) -> None:
        current["phase"] = "after"

    handles = [m.register_forward_pre_hook(record) for m in encoder.modules()
               if m is not encoder and id(m) not in layer_ids]
    handles.append(layers[0].register_forward_pre_hook(enter_first))
    handles.append(layers[-1].register_forward_hook(leave_last))
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            device = next(encoder.parameters()).device
            ids = torch.zeros((1, 4), dtype=torch.long, device=device)
            encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        for handle in handles:
            handle.remove()
        encoder.train(was_training)
    return phases


def encoder_layout(encoder: nn.Module) -> EncoderLayout:
    """Embeddings, layer list and a depth for every parameter of `encoder` (see the module doc)."""
    container, attr, layers = find_layer_list(encoder)
    get_embeddings = getattr(encoder, "get_input_embeddings", None)
    embeddings = get_embeddings() if callable(get_embeddings) else None
    if not isinstance(embeddings, nn.Module):
        raise MtbioError(f"encoder '{_model_name(encoder)}' is not supported by the layer options: no input embeddings")
    names = {id(m): n for n, m in encoder.named_modules()}
    layer_of = {id(p): i + 1 for i, block in enumerate(layers) for p in block.parameters()}
    embedding_name = names[id(embeddings)]
    # the embedding stage: the top-level child that holds the input embeddings
    stage = embedding_name.split(".")[0]
    phases = _forward_phases(encoder, layers)
    by_phase = {"before": 0, "inside": 1, "after": len(layers)}
    depth: dict[str, int] = {}
    for name, param in encoder.named_parameters():
        module = name.rsplit(".", 1)[0] if "." in name else ""
        if id(param) in layer_of:
            depth[name] = layer_of[id(param)]
        elif name.split(".")[0] == stage:
            depth[name] = 0
        else:  # run before, between or after the layers; never run (read as weights, e.g. DeBERTa's
            depth[name] = by_phase.get(phases.get(module, "before"), 0)  # relative embeddings): an input
    return EncoderLayout(layers=layers, container=container, attr=attr, depth=depth)
