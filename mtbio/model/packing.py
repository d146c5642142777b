"""What an encoder needs to run packed rows (see `mtbio.data.packing`), and a check that it does.

Packed rows reach the encoder with explicit `position_ids` and a 4D attention mask, which
Hugging Face encoders take as given. Two things depend on the encoder:

- position ids start at 0 (BERT, ELECTRA, DeBERTa) or after the padding index (RoBERTa);
- the mask format: boolean for SDPA, additive float for eager attention (converted in
  `MultiTaskModel.forward`).

Rather than trust a list of architectures, `packing_error` runs two short sequences packed and
unpacked through the encoder and compares the hidden states.
"""
from __future__ import annotations

import torch
from torch import nn

from mtbio.data.packing import collate_packed


def position_offset(encoder: nn.Module) -> int:
    """The first position id of a sequence: RoBERTa-style embeddings count from padding_idx + 1."""
    padding_idx = getattr(getattr(encoder, "embeddings", None), "padding_idx", None)
    return padding_idx + 1 if isinstance(padding_idx, int) else 0


def attention_bias(mask: torch.Tensor, encoder: nn.Module, dtype: torch.dtype) -> torch.Tensor:
    """A boolean 4D mask in the form the encoder's attention takes: unchanged for SDPA (and
    anything else that takes booleans), 0 / most-negative float for eager attention."""
    if getattr(encoder.config, "_attn_implementation", None) == "eager":
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)
    return mask


def packing_error(encoder: nn.Module, pad_token_id: int, tolerance: float = 1e-3) -> str | None:
    """None if packed rows give this encoder's unpacked hidden states (eval mode, no gradient,
    RNG untouched); otherwise why not."""
    device = next(encoder.parameters()).device
    vocab = int(encoder.config.vocab_size)
    ids = [[(7 * i + 3) % vocab for i in range(n)] for n in (5, 3)]
    rows = [{"input_ids": seq, "token_type_ids": [0] * len(seq), "labels": [0] * len(seq)} for seq in ids]
    packed = collate_packed(rows, pad_token_id, position_offset(encoder), capacity=8)  # one row
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            mask = attention_bias(packed["attention_mask"].to(device), encoder, torch.float32)
            hidden = encoder(input_ids=packed["input_ids"].to(device), attention_mask=mask,
                             position_ids=packed["position_ids"].to(device)).last_hidden_state[0]
            expected = [encoder(input_ids=torch.tensor([seq], device=device)).last_hidden_state[0] for seq in ids]
    except Exception as exc:  # noqa: BLE001 - any failure means: this encoder does not take packed rows
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    finally:
        encoder.train(was_training)
    got = hidden[: len(ids[0]) + len(ids[1])]
    gap = float((got - torch.cat(expected)).abs().max())
    if gap > tolerance:
        return f"packed hidden states differ from unpacked ones by up to {gap:.3g}"
    return None
