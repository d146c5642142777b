"""Dynamic padding: pad values per column, rounding to a multiple of 8, label dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mtbio.data.collate import collate, to_device


def _row(n: int, **extra: object) -> dict[str, object]:
    return {"input_ids": list(range(101, 101 + n)), "attention_mask": [1] * n, "token_type_ids": [0] * (n - 1) + [1],
            "length": n, **extra}


def test_tagging_batch_pads_each_column_with_its_own_value() -> None:
    rows = [_row(3, labels=[-100, 2, -100], word_index=[-1, 0, -1], n_words=1),
            _row(10, labels=[-100] + [1] * 8 + [-100], word_index=[-1, *range(8), -1], n_words=8)]
    batch = collate(rows, pad_token_id=0, pad_to_multiple_of=8, padded={"labels": -100})  # tagging's declaration
    assert batch["input_ids"].shape == (2, 16) and batch["input_ids"].dtype == torch.long
    assert batch["input_ids"][0].tolist() == [101, 102, 103] + [0] * 13
    assert batch["attention_mask"][0].tolist() == [1, 1, 1] + [0] * 13
    assert batch["token_type_ids"][1].tolist() == [0] * 9 + [1] + [0] * 6
    assert batch["labels"][0].tolist() == [-100, 2] + [-100] * 14 and batch["labels"].dtype == torch.long
    assert batch["word_index"][1].tolist() == [-1, *range(8)] + [-1] * 7
    assert batch["n_words"].tolist() == [1, 8] and batch["length"].tolist() == [3, 10]


def test_no_rounding_by_default_and_custom_pad_id() -> None:
    batch = collate([_row(3, labels=1), _row(5, labels=0)], pad_token_id=7)
    assert batch["input_ids"].shape == (2, 5) and batch["input_ids"][0, 3:].tolist() == [7, 7]


def test_scalar_and_multilabel_label_dtypes() -> None:
    cls = collate([_row(3, labels=2), _row(4, labels=0)], pad_token_id=0)["labels"]
    assert cls.dtype == torch.long and cls.tolist() == [2, 0]
    reg = collate([_row(3, labels=3.5), _row(4, labels=float("nan"))], pad_token_id=0)["labels"]
    assert reg.dtype == torch.float32 and reg[0].item() == 3.5 and torch.isnan(reg[1])
    multi = collate([_row(3, labels=[1.0, 0.0, 1.0]), _row(4, labels=[0.0, 0.0, 0.0])], pad_token_id=0)["labels"]
    assert multi.dtype == torch.float32 and multi.shape == (2, 3)


def test_numpy_rows_from_a_formatted_dataset() -> None:
    rows = [{k: np.asarray(v) for k, v in _row(n, labels=[-100] * n).items()} for n in (2, 9)]
    batch = collate(rows, pad_token_id=0, pad_to_multiple_of=8, padded={"labels": -100})
    assert batch["input_ids"].shape == (2, 16) and batch["labels"][0].tolist() == [-100] * 16


def test_widths_are_rounded_to_eight_on_a_gpu_and_for_bf16_on_a_cpu() -> None:
    from mtbio.data.collate import pad_multiple_for

    assert pad_multiple_for("cpu") is None and pad_multiple_for(torch.device("cpu"), "no") is None
    assert pad_multiple_for("cpu", "bf16") == 8
    assert pad_multiple_for("cuda:0") == 8 and pad_multiple_for("cuda:0", "no") == 8


def test_to_device_keeps_the_values_and_leaves_cpu_batches_alone() -> None:
    batch = collate([_row(3), _row(5)], pad_token_id=0)
    assert all(moved is batch[k] for k, moved in to_device(batch, torch.device("cpu")).items())
    if not torch.cuda.is_available():
        pytest.skip("the pinned, non-blocking copy needs a GPU")
    moved = to_device(batch, torch.device("cuda"))
    torch.cuda.synchronize()
    for key, value in batch.items():
        assert moved[key].is_cuda and torch.equal(moved[key].cpu(), value)


def test_integer_list_labels_pad_per_token_only_where_the_kind_says_so() -> None:
    """A span label (start, end) is two integers per example, not a tag per token: without the kind declaring
    `labels` per token it is stacked as it is."""
    from mtbio.tasks.kinds import task_kind

    rows = [_row(3, labels=[0, 2]), _row(6, labels=[1, 4])]
    assert collate(rows, pad_token_id=0)["labels"].tolist() == [[0, 2], [1, 4]]
    assert task_kind("tagging").padded_columns == {"labels": -100}
    assert task_kind("classification").padded_columns == {}
