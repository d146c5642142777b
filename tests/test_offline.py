"""Local work never touches the network; an uncached hub model with the hub unreachable is one clear error."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mtbio.data.featurize import featurize
from mtbio.data.loading import read_split
from mtbio.errors import MtbioError
from mtbio.model.encoder import default_encoder_path, load_encoder, load_tokenizer
from mtbio.tasks.loading import load_catalog


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Online mode (no offline variables), but every connection attempt is recorded and refused."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def test_local_data_and_encoders_load_without_any_connection(no_network: list[object], data_dir: Path,
                                                             tiny_encoder: str) -> None:
    task = load_catalog().get("ddi")
    examples = read_split(task, "dev", data_dir, max_examples=20)
    for source in (tiny_encoder, default_encoder_path()):
        tokenizer = load_tokenizer(source)
        load_encoder(source)
        assert len(featurize(examples, task, tokenizer)) == 20
    assert no_network == []


def test_uncached_hub_model_fails_with_one_clear_line(no_network: list[object]) -> None:
    with pytest.raises(MtbioError) as error:
        load_tokenizer("some-org/model-that-is-not-cached")
    message = str(error.value)
    assert "\n" not in message
    assert "some-org/model-that-is-not-cached" in message and "unreachable" in message


def test_a_half_precision_checkpoint_loads_in_float32(tiny_encoder: str, tmp_path: Path) -> None:
    """Many hub encoders are saved in fp16/bf16; training needs float32 master weights, so the encoder
    must not come back in the checkpoint's dtype (transformers 5's default)."""
    import torch
    from transformers import AutoModel

    half = tmp_path / "half"
    AutoModel.from_pretrained(tiny_encoder).to(torch.bfloat16).save_pretrained(half)
    load_tokenizer(tiny_encoder).save_pretrained(half)
    assert {p.dtype for p in load_encoder(str(half)).parameters()} == {torch.float32}
