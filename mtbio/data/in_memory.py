"""A `datasets.Dataset` or `DatasetDict` already in memory, as an mtbio task: its splits are written as
parquet files with a task definition (`format: hf`) beside them, so every command and the Python
API train it like any other task.

    task = mtbio.task_from_dataset(dataset_dict, name="smoking", type="classification",
                                   columns={"text": "note", "label": "smoker"}, metric="accuracy")
    mtbio finetune --task smoking --task-defs {task.task_defs} --data-dir {task.data_dir}
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mtbio.data.split_cache import default_cache_dir
from mtbio.data.readers.hf import label_names
from mtbio.errors import MtbioError
from mtbio.fileio import make_dir, write_text, writing
from mtbio.tasks.kinds import task_kind
from mtbio.tasks.loading import load_task_def
from mtbio.tasks.schema import TaskDef

SPLIT_NAMES = {"train": "train", "validation": "dev", "dev": "dev", "test": "test"}


@dataclass(frozen=True)
class DatasetTask:
    """A task made from an in-memory dataset: its definition and where its files are."""

    definition: TaskDef
    data_dir: Path  # --data-dir / data_dir=
    task_defs: Path  # --task-defs / task_defs=[...]

    @property
    def name(self) -> str:
        return self.definition.name


def task_from_dataset(dataset: Any, name: str, type: str, columns: dict[str, str], metric: str, *,
                      labels: list[str] | None = None, directory: Path | str | None = None,
                      **fields: Any) -> DatasetTask:
    """Write `dataset` (a `DatasetDict` with train and dev/validation splits, test optional; or one
    `Dataset`, split by document with `derived_split`) and its task definition; return the task.
    `labels` default to the label column's `ClassLabel` names; `fields` are any other task-definition
    fields (tagging_scheme, max_length, ...). `directory` defaults to one keyed by the dataset's
    fingerprint under the mtbio cache."""
    import datasets

    if isinstance(dataset, datasets.Dataset):
        splits = {"all": dataset}
        fields.setdefault("derived_split", {})
    elif isinstance(dataset, datasets.DatasetDict):
        unknown = sorted(set(dataset) - set(SPLIT_NAMES))
        if unknown:
            raise MtbioError(f"dataset splits {unknown}: mtbio knows {', '.join(SPLIT_NAMES)}")
        splits = {SPLIT_NAMES[key]: part for key, part in dataset.items()}
    else:
        raise MtbioError(f"expected a datasets.Dataset or DatasetDict, got {dataset.__class__.__name__}")
    label_column = columns.get("label")
    first = next(iter(splits.values()))
    if label_column is None or label_column not in first.column_names:
        raise MtbioError(f"columns: 'label' must name a field of the dataset (fields: {', '.join(first.column_names)})")
    if labels is None and task_kind(type).min_labels > 0:
        labels = label_names(first.features[label_column])
        if labels is None:
            raise MtbioError(f"labels: field '{label_column}' is not a ClassLabel; pass labels=[...]")
    root = Path(directory) if directory is not None else _default_directory(name, splits)
    definition = {"name": name, "type": type, "format": "hf", "columns": dict(columns), "metric": metric,
                  "files": {split: f"{name}/{split}.parquet" for split in splits},
                  **({"labels": list(labels)} if labels is not None else {}), **fields}
    make_dir(root / name)
    for split, part in splits.items():
        target = root / name / f"{split}.parquet"
        with writing(target):
            part.to_parquet(str(target))
    defs = root / "task_defs"
    write_text(defs / f"{name}.yml", yaml.safe_dump(definition, sort_keys=False))
    return DatasetTask(load_task_def(defs / f"{name}.yml"), root, defs)


def _default_directory(name: str, splits: dict[str, Any]) -> Path:
    digest = hashlib.sha256("|".join(f"{k}:{v._fingerprint}" for k, v in sorted(splits.items())).encode())
    return default_cache_dir() / "datasets" / f"{name}-{digest.hexdigest()[:12]}"
