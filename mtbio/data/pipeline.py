"""From a task definition to batches: read the split, featurize (cached), and serve rows by index.

This is the one place where readers, featurization and collation meet, so that training,
evaluation and prediction all see the same data the same way.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from mtbio.data.collate import collate
from mtbio.data.example import Example
from mtbio.data.featurize import (LABELS_LOST, effective_max_length, examples_fingerprint, featurize,
                                  featurize_cached, featurize_stats)
from mtbio.data.split_cache import file_fingerprint
from mtbio.errors import DataFormatError
from mtbio.data.loading import read_split, split_warnings
from mtbio.data.packing import PACKED_COLUMNS, collate_packed
from mtbio.data.readers import is_pair_task
from mtbio.tasks.loading import is_dataset_split, require_data, split_paths
from mtbio.tasks.schema import TaskDef

log = logging.getLogger(__name__)

BOOKKEEPING_COLUMNS = ("length", "truncated", LABELS_LOST)  # featurization's own; every other goes into the batch


@dataclass
class SplitData:
    """One split of one task: the examples (gold labels, groups) and their features as columns."""

    examples: list[Example]
    columns: dict[str, list[Any]]
    truncated: int = 0
    padded: dict[str, int] = field(default_factory=dict)  # the kind's per-token columns and their padding value
    labels_lost: int = 0  # labels the cut removed (a kind's LABELS_LOST column; 0 where it has none)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def lengths(self) -> list[int]:
        return self.columns["length"]

    def batch(self, indices: Sequence[int], pad_token_id: int,
              pad_to_multiple_of: int | None = None) -> dict[str, torch.Tensor]:
        rows = [{k: self.columns[k][i] for k in self.columns if k not in BOOKKEEPING_COLUMNS} for i in indices]
        return collate(rows, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of, padded=self.padded)

    def packed_batch(self, indices: Sequence[int], pad_token_id: int, position_offset: int,
                     pad_to_multiple_of: int | None = None) -> dict[str, torch.Tensor]:
        """The rows at `indices` packed (`mtbio.data.packing`; per-token tasks only)."""
        rows = [{k: self.columns[k][i] for k in PACKED_COLUMNS if k in self.columns} for i in indices]
        return collate_packed(rows, pad_token_id, position_offset, pad_to_multiple_of)

    def eval_batches(self, batch_size: int) -> Iterator[list[int]]:
        """Indices in length order (little padding), each batch at most `batch_size`."""
        order = sorted(range(len(self)), key=self.lengths.__getitem__)
        for start in range(0, len(order), batch_size):
            yield order[start : start + batch_size]


@dataclass
class TaskData:
    task: TaskDef
    splits: dict[str, SplitData] = field(default_factory=dict)


def _to_split(examples: list[Example], dataset: Any, task: TaskDef) -> SplitData:
    columns = dataset.to_dict()
    truncated = int(sum(columns.get("truncated", [])))
    return SplitData(examples=examples, columns=columns, truncated=truncated, padded=dict(task.kind.padded_columns),
                     labels_lost=int(sum(columns.get(LABELS_LOST, []))))


def load_task_split(
    task: TaskDef,
    split: str,
    data_dir: Path,
    tokenizer: Any,
    max_examples: int | None = None,
    max_length: int | None = None,
) -> SplitData:
    """Read and featurize one split; features are cached on disk keyed by data, task and tokenizer."""
    examples = read_split(task, split, data_dir, max_examples=max_examples)
    for line in split_warnings(task, split, examples):
        log.warning("%s", line)
    paths = split_paths(task, split, data_dir)
    files = [p for p in paths if not is_dataset_split(p)]
    fingerprint = f"{split}|{max_examples}|" + (file_fingerprint(files) if len(files) == len(paths)
                                                 else examples_fingerprint(examples))
    dataset = featurize_cached(examples, task, tokenizer, max_length or task.max_length, source_fingerprint=fingerprint)
    _log_truncation(task, split, dataset, tokenizer, max_length)  # once per split, from the cache or not
    return _to_split(examples, dataset, task)


def _log_truncation(task: TaskDef, split: str, dataset: Any, tokenizer: Any, max_length: int | None) -> None:
    """The split's truncation as an info line, or a warning where the cut removed labels (per task and split)."""
    stats = featurize_stats(dataset)
    length = effective_max_length(task, tokenizer, max_length)  # the length texts were really cut at
    if stats.labels_lost:
        windows = task.kind.pools or task.kind.labels.per_word  # the kinds a sliding_window reads
        hint = ("raise --max-length or sliding_window.max_windows" if task.sliding_window is not None else
                "raise --max-length or read long texts in windows (sliding_window)" if windows else
                "raise --max-length, up to the encoder's limit")
        log.warning("task '%s' %s: cut at max_length %d: %s; %d %s; %s", task.name, split, length, stats,
                    stats.labels_lost, task.kind.lost_labels, hint)
    elif stats.truncated or stats.words_lost:
        log.info("%s/%s: %s (max_length %d)", task.name, split, stats, length)


def load_task_data(
    task: TaskDef,
    data_dir: Path | None,
    tokenizer: Any,
    splits: Sequence[str],
    max_train_examples: int | None = None,
    max_length: int | None = None,
    max_eval_examples: int | None = None,
) -> TaskData:
    """The requested splits of a task (train capped at `max_train_examples`, dev and test at
    `max_eval_examples`: fixed subsets); a missing required file is one clear error."""
    require_data(task, data_dir)
    assert data_dir is not None
    data = TaskData(task)
    for split in splits:
        limit = max_train_examples if split == "train" else max_eval_examples
        data.splits[split] = load_task_split(task, split, data_dir, tokenizer, limit, max_length)
    return data


def raw_inputs_to_examples(task: TaskDef, inputs: Sequence[str | Sequence[str]]) -> list[Example]:
    """Raw prediction inputs → unlabelled examples, as the task's input shape reads them (`mtbio.tasks.shapes`:
    words split into words and punctuation, or a list of words; a pair's two texts separated by a tab, or a
    2-item sequence; a text and its segments separated by tabs, or a sequence)."""
    examples, pair = [], is_pair_task(task)
    for i, item in enumerate(inputs):
        try:
            fields = task.kind.inputs.fields(item, pair)
        except ValueError as error:
            raise DataFormatError("input", i + 1, f"task '{task.name}' {error}") from None
        examples.append(Example(uid=f"input-{i + 1}", label=None, origin=f"input:{i + 1}", inputs=fields))
    return examples


def featurize_raw(task: TaskDef, examples: list[Example], tokenizer: Any, max_length: int | None = None) -> SplitData:
    """Featurize unlabelled examples (prediction) without touching the cache; truncation is logged once."""
    dataset = featurize(examples, task, tokenizer, max_length or task.max_length)
    _log_truncation(task, "input", dataset, tokenizer, max_length)
    return _to_split(examples, dataset, task)
