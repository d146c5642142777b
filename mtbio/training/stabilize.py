"""Fine-tuning stabilization and layer removal (Tinn et al., seed 001, sections 3.2–3.5).

- `--freeze-layers K`: the embeddings and the lowest K layers get no updates (Grießhaber et al. 2020).
- `--layerwise-lr-decay γ`: layer l of L gets lr·γ^(L−l), the embeddings lr·γ^L, the heads lr
  (Clark et al. 2020; the top layer trains at the base rate).
- `--reinit-layers K`: the top K layers are re-initialised with the model's own initialiser
  (Zhang et al. 2021) before training.
- `--drop-top-layers K`: the top K layers are removed (seed 001 Table 7); the saved encoder's
  config says the new depth, so `AutoModel.from_pretrained` loads it as a shallower model.
- `--no-bias-correction`: AdamW without Adam's bias correction, as the original BERT optimizer.

Layers are found by structure (`mtbio.model.layers`), so these work for any encoder family
whose layers are one list of identical blocks.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from mtbio.errors import MtbioError
from mtbio.model.layers import EncoderLayout, encoder_layout


def drop_top_layers(encoder: nn.Module, k: int) -> None:
    """Remove the top `k` layers and record the new depth in `encoder.config`."""
    layout = encoder_layout(encoder)
    total = layout.num_layers
    if k >= total:
        raise MtbioError(f"--drop-top-layers {k}: the encoder has only {total} layers; at least one must remain")
    kept = nn.ModuleList(list(layout.layers)[: total - k])
    setattr(layout.container, layout.attr, kept)
    config = encoder.config
    config.num_hidden_layers = total - k
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and len(layer_types) == total:
        config.layer_types = layer_types[: total - k]


def reinit_top_layers(encoder: nn.Module, k: int) -> None:
    """Re-initialise the top `k` layers with the model's `_init_weights` (as if never pretrained)."""
    layout = encoder_layout(encoder)
    if k > layout.num_layers:
        raise MtbioError(f"--reinit-layers {k}: the encoder has only {layout.num_layers} layers")
    init = getattr(encoder, "_init_weights", None)
    if not callable(init):
        raise MtbioError(f"--reinit-layers: {type(encoder).__name__} has no weight initialiser (_init_weights)")
    for block in list(layout.layers)[layout.num_layers - k:]:
        before = {n: p.detach().clone() for n, p in block.named_parameters() if p.ndim >= 2}
        for param in block.parameters():  # loaded weights are marked initialised; the initialiser skips those
            if hasattr(param, "_is_hf_initialized"):
                param._is_hf_initialized = False
        for module in block.modules():
            if getattr(module, "_is_hf_initialized", False):
                module._is_hf_initialized = False
            init(module)
        unchanged = [n for n, p in block.named_parameters() if n in before and torch.equal(p, before[n])]
        if unchanged:
            raise MtbioError(f"--reinit-layers: {type(encoder).__name__}'s initialiser left {unchanged[0]} unchanged; "
                             "this architecture is not supported")


def freeze_lower_layers(encoder: nn.Module, k: int) -> None:
    """Freeze the embedding stage (depth 0) and layers 1..k."""
    layout = encoder_layout(encoder)
    if k > layout.num_layers:
        raise MtbioError(f"--freeze-layers {k}: the encoder has only {layout.num_layers} layers")
    for name, param in encoder.named_parameters():
        if layout.depth[name] <= k:
            param.requires_grad_(False)


def apply_layer_options(encoder: nn.Module, config: Any) -> None:
    """Drop, then re-initialise, then freeze, as `config` asks (layer counts refer to what remains)."""
    if config.drop_top_layers:
        drop_top_layers(encoder, config.drop_top_layers)
    if config.reinit_layers:
        reinit_top_layers(encoder, config.reinit_layers)
    if config.freeze_layers is not None:
        freeze_lower_layers(encoder, config.freeze_layers)


def layer_learning_rates(layout: EncoderLayout, lr: float, gamma: float) -> dict[str, float]:
    """Encoder parameter name → lr·γ^(L − depth)."""
    total = layout.num_layers
    return {name: lr * gamma ** (total - depth) for name, depth in layout.depth.items()}


def layerwise_parameter_groups(
    model: nn.Module, weight_decay: float, lr: float, gamma: float, no_decay: Callable[[str, torch.Tensor], bool]
) -> list[dict]:
    """One optimizer group per (learning rate, decayed or not); `model.encoder` is the encoder, the rest heads."""
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, nn.Module):
        raise MtbioError("--layerwise-lr-decay needs a model with an `encoder`")
    rates = layer_learning_rates(encoder_layout(encoder), lr, gamma)
    groups: dict[tuple[float, bool], list[torch.Tensor]] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        inner = name[len("encoder."):] if name.startswith("encoder.") else None
        rate = rates[inner] if inner is not None and inner in rates else lr
        groups.setdefault((rate, no_decay(name, param)), []).append(param)
    return [{"params": params, "lr": rate, "weight_decay": 0.0 if undecayed else weight_decay}
            for (rate, undecayed), params in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1]))]


class AdamWNoBiasCorrection(torch.optim.Optimizer):
    """AdamW without bias correction (BERT's original optimizer): p ← p − lr·(m / (√v + ε) + wd·p).

    Its state (step, exp_avg, exp_avg_sq per parameter) is all tensors, and its groups are plain
    numbers, so `mtbio.training.checkpoint` saves and restores it like torch's AdamW.
    """

    def __init__(self, params: Iterable[Any], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        if lr <= 0 or eps <= 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise MtbioError(f"invalid optimizer settings lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1
                grad = param.grad
                param.mul_(1 - group["lr"] * group["weight_decay"])
                state["exp_avg"].lerp_(grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                param.addcdiv_(state["exp_avg"], state["exp_avg_sq"].sqrt().add_(group["eps"]), value=-group["lr"])
        return loss
