"""LoRA adapters on the shared encoder, through PEFT's functional API (`peft.functional`): one adapter per
task, named by the task, injected into the encoder in place (so the encoder keeps its own class, inputs and
attributes), the encoder's own weights frozen. `MultiTaskModel.forward` switches to the batch's task's adapter.

Saved as PEFT saves an adapter of the encoder (`PeftModel.save_pretrained`): a directory with
`adapter_config.json` and `adapter_model.safetensors`, which `PeftModel.from_pretrained(AutoModel.from_pretrained(
ENCODER_DIR), ADAPTER_DIR)` loads without mtbio.
"""
from __future__ import annotations

import contextlib
import copy
import json
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from pydantic import BaseModel, ConfigDict, Field
from safetensors.torch import load_file
from torch import nn

from mtbio.errors import MtbioError
from mtbio.fileio import save_pretrained, save_tensors
from mtbio.registry import Registry, validate_options

ADAPTER_DIR = "adapter"  # heads/<task>/adapter/
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."  # the keys of a PeftModel's adapter file start with this
LORA_PREFIX = "lora_"  # the names of LoRA's own parameters inside a wrapped layer


class AdapterOptions(BaseModel):
    """An adapter's options (none by default) and the PEFT config they make for one task's adapter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def peft_config(self, encoder: nn.Module) -> Any:
        """The PEFT config of one task's adapter on `encoder` (None: no adapter, the whole encoder trains)."""
        return None


ADAPTERS: Registry[type[AdapterOptions]] = Registry("adapter")
ADAPTERS.register("none")(AdapterOptions)  # the whole encoder trains


@ADAPTERS.register("lora")
class LoraOptions(AdapterOptions):
    """LoRA's options: `--adapter '{name: lora, r: 16, alpha: 32}'`."""

    r: int = Field(8, ge=1, description="rank")
    alpha: int = Field(16, ge=1, description="scaling alpha: the update is scaled by alpha/r")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout on the LoRA branch's input")
    target_modules: tuple[str, ...] = Field((), description="encoder modules that get LoRA, names or name suffixes "
                                                             "(default: PEFT's for the model type)")

    def peft_config(self, encoder: nn.Module) -> Any:
        from peft import LoraConfig

        targets = list(self.target_modules) or default_target_modules(encoder)
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout, target_modules=targets,
                          base_model_name_or_path=getattr(encoder, "name_or_path", None) or None)


def adapter_options(name: str, values: Mapping[str, Any]) -> AdapterOptions:
    """Adapter `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(ADAPTERS.get(name), values, f"adapter '{name}'")


# LoRA targets for model types PEFT has no default for. ModernBERT fuses query, key and value into one linear,
# `Wqkv`: LoRA there adapts the attention's inputs as PEFT's BERT default (query, value) does, plus the key.
MTBIO_TARGET_MODULES = {"modernbert": ["Wqkv"]}


def default_target_modules(encoder: nn.Module) -> list[str]:
    """The default LoRA targets for the encoder's model type: PEFT's (BERT, MiniLM, RoBERTa, ELECTRA: query, value),
    else mtbio's (`MTBIO_TARGET_MODULES`: ModernBERT's fused `Wqkv`)."""
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    model_type = getattr(getattr(encoder, "config", None), "model_type", None)
    DEFAULTS = {**MTBIO_TARGET_MODULES, **PEFT_DEFAULTS}
    if model_type not in DEFAULTS:
        raise MtbioError(f"--adapter lora: peft has no default target modules for model type '{model_type}'; "
                         "name them: --adapter '{name: lora, target_modules: [...]}'")
    return list(DEFAULTS[model_type])


def add_adapter(encoder: nn.Module, task: str, config: Any) -> None:
    """Inject a new LoRA adapter named `task`; the encoder's own weights are frozen, every adapter trains."""
    from peft.functional import inject_adapter_in_model

    try:
        with warnings.catch_warnings():  # several adapters in one encoder are the point here
            warnings.filterwarnings("ignore", message="Already found a `peft_config` attribute")
            inject_adapter_in_model(copy.deepcopy(config), encoder, adapter_name=task)
    except ValueError as exc:  # target modules that match nothing, or modules LoRA cannot wrap
        raise MtbioError(f"--adapter lora: {' '.join(str(exc).split())[:300]}") from None


def use_adapter(encoder: nn.Module, task: str, adapters: tuple[str, ...]) -> None:
    """Make `task`'s adapter the active one. PEFT freezes the inactive adapters when it switches; they are made
    trainable again, so that the optimizer's parameters stay the same (a batch's backward reaches only its own)."""
    from peft.functional import set_adapter, set_requires_grad

    if task not in adapters:
        raise MtbioError(f"task '{task}' has no adapter (adapters: {', '.join(adapters)})")
    set_adapter(encoder, task)
    set_requires_grad(encoder, list(adapters), requires_grad=True)


NO_ADAPTER = "__base__"  # PEFT's name for a row of a mixed batch that runs through the base weights only


@contextlib.contextmanager
def mixed_adapters(encoder: nn.Module, names: list[str]) -> Iterator[None]:
    """Within the block, row i of a forward pass runs through adapter `names[i]` (NO_ADAPTER: none): PEFT's
    mixed-adapter batches (its `adapter_names`), for an encoder the adapters were injected into. Inference only."""
    from peft.tuners.lora import LoraLayer

    def inject(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "adapter_names": names}

    hooks = [m.register_forward_pre_hook(inject, with_kwargs=True) for m in encoder.modules() if isinstance(m, LoraLayer)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def adapter_tensors(encoder: nn.Module, task: str) -> dict[str, torch.Tensor]:
    """`task`'s adapter weights keyed as in a `PeftModel` over the encoder (`base_model.model.` + module path)."""
    from peft.functional import get_peft_model_state_dict

    state = get_peft_model_state_dict(encoder, adapter_name=task)
    return {PEFT_PREFIX + key: value.detach().contiguous().cpu() for key, value in state.items()}


def save_adapter(encoder: nn.Module, task: str, directory: Path) -> None:
    """`task`'s adapter as PEFT's `save_pretrained` writes it: adapter_config.json + adapter_model.safetensors."""
    save_pretrained(encoder.peft_config[task], directory)
    save_tensors(adapter_tensors(encoder, task), directory / ADAPTER_WEIGHTS, metadata={"format": "pt"})


def read_adapter_config(directory: Path) -> Any:
    """The `LoraConfig` of a saved adapter; anything but a LoRA adapter is refused, naming the file."""
    from peft import LoraConfig

    path = directory / ADAPTER_CONFIG
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MtbioError(f"{path}: unreadable adapter config ({exc})") from None
    kind = data.get("peft_type") if isinstance(data, dict) else None
    if kind != "LORA":
        raise MtbioError(f"{path}: not a LoRA adapter config (peft_type {kind!r})")
    try:
        return LoraConfig.from_pretrained(str(directory))
    except (TypeError, ValueError) as exc:
        raise MtbioError(f"{path}: invalid LoRA config ({exc})") from None


def load_adapter(encoder: nn.Module, task: str, directory: Path, config: Any = None) -> None:
    """Inject `task`'s adapter saved in `directory` (with `config` instead of the saved one's where given: same
    rank, alpha and targets) and load its weights strictly."""
    from peft.functional import set_peft_model_state_dict

    saved = read_adapter_config(directory)
    if config is not None and (config.r, config.lora_alpha, set(config.target_modules)) != \
            (saved.r, saved.lora_alpha, set(saved.target_modules)):
        raise MtbioError(f"{directory}: adapter trained with r={saved.r}, alpha={saved.lora_alpha}, targets "
                         f"{sorted(saved.target_modules)}; give the same r, alpha and target_modules in --adapter")
    add_adapter(encoder, task, config if config is not None else saved)
    path = directory / ADAPTER_WEIGHTS
    try:
        weights = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for corrupt files
        raise MtbioError(f"{path}: unreadable safetensors file ({exc})") from None
    expected = adapter_tensors(encoder, task)
    if set(weights) != set(expected) or any(weights[k].shape != expected[k].shape for k in expected):
        raise MtbioError(f"{path}: weights do not match the adapter config and the encoder (names or shapes differ)")
    set_peft_model_state_dict(encoder, {k[len(PEFT_PREFIX):]: v for k, v in weights.items()}, adapter_name=task)


def base_state_dict(encoder: nn.Module) -> dict[str, torch.Tensor]:
    """The encoder's weights under its own names, without the adapters: what `AutoModel` loads."""
    state = {}
    for key, value in encoder.state_dict().items():
        if f".{LORA_PREFIX}" in key:
            continue
        state[key.replace(".base_layer.", ".")] = value
    return state


def merged_state_dict(encoder: nn.Module, task: str) -> dict[str, torch.Tensor]:
    """The encoder's weights with `task`'s adapter merged in (PEFT's `merge`), under the encoder's own names."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    merged = copy.deepcopy(encoder)
    for module in merged.modules():
        if isinstance(module, BaseTunerLayer):
            module.merge(adapter_names=[task])
    return base_state_dict(merged)
