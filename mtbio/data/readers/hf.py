"""`hf`: a split of a Hugging Face `datasets` dataset, loaded with `datasets.load_dataset`.

    files:
      train: mine/train.parquet   # a local file (parquet, json/jsonl, csv, tsv, arrow) or a
      dev: mine/dev.parquet       # `save_to_disk` directory, relative to the data directory
      test: "hf:test"             # or a split of the dataset that reader_options.path names
    reader_options:
      path: bigbio/bc5cdr         # for "hf:" splits: a hub id, or a dataset directory under the data
      name: bc5cdr_bigbio_kb      #   directory; for local files: the builder (default: from the suffix)
      revision: main
      schema: bigbio_kb           # rows in a BigBio schema (mtbio.data.bigbio); else `columns` name fields
    columns: {text: abstract, label: category}   # label, id, group and the input fields the task's kind
                                                  # declares: text, text_b; tokens for tagging; segments, ...

Labels stored as a `ClassLabel` are read as their names. `files: {all: "hf:train"}` with a
`derived_split` splits one dataset split by document, as for files.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mtbio.data.bigbio import SCHEMA_OPTIONS, SCHEMAS, check_schema_options, examples_from_schema
from mtbio.data.example import Example, Label
from mtbio.data.readers.base import input_fields, input_values, register
from mtbio.errors import DataFormatError, MtbioError
from mtbio.tasks.loading import DATASET_SPLIT_PREFIX
from mtbio.tasks.schema import TaskDef

COLUMNS = {"label": False, "id": False, "group": False}  # with the input fields the task's kind declares
OPTIONS: dict[str, type | tuple[type, ...]] = {"path": str, "name": str, "revision": str, "schema": str,
                                                **SCHEMA_OPTIONS}
BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".arrow": "arrow"}


def check(task: TaskDef) -> list[tuple[str, str]]:
    """Without a schema, `columns` must name the label and the input fields the task's kind requires."""
    options = task.reader_options
    schema = options.get("schema")
    if schema is not None:
        if schema not in SCHEMAS:
            return [("reader_options.schema", f"unknown schema '{schema}' (known: {', '.join(SCHEMAS)})")]
        return check_schema_options(options)
    needed = [f.name for f in input_fields(task) if f.required] + ["label"]
    return [("columns", f"format 'hf' needs column '{key}' (a field of the dataset), or reader_options.schema")
            for key in needed if key not in task.columns]


@register("hf", columns=COLUMNS, column_kind="name", options=OPTIONS, check=check, inputs="accepted")
def read_hf(path: Path, task: TaskDef) -> Iterator[Example]:
    """The examples of one dataset split (a local file or directory, or an "hf:<split>" of reader_options.path)."""
    if _empty_file(path):
        raise MtbioError(f"split {_split_of(path, task)} of {path} is empty (no rows); give it examples or drop it "
                         "from the task's files")
    dataset, source = load_split(path, task.reader_options)
    if len(dataset) == 0:
        raise MtbioError(f"split {_split_of(path, task)} of {source} is empty (no rows)")
    schema = task.reader_options.get("schema")
    if schema is not None:
        return examples_from_schema((row for _, row in rows(dataset, source)), schema, task, source)
    return _from_columns(dataset, task, source)


def _empty_file(path: Path) -> bool:
    """A local file with no rows: zero bytes, or a parquet file whose metadata counts none (`datasets` cannot
    load either, and says so only vaguely)."""
    if not path.is_file():
        return False
    if path.stat().st_size == 0:
        return True
    if path.suffix.lower() != ".parquet":
        return False
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path).num_rows == 0
    except Exception:  # noqa: BLE001 - not a readable parquet file: load_split says why
        return False


def _split_of(path: Path, task: TaskDef) -> str:
    """The name of the split `path` holds in the task's files (its file name when no split names it)."""
    return next((split for split, name in task.files.items() if Path(str(name)).name == path.name), path.name)


def rows(dataset: Any, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row number, row) for every row; a row the dataset cannot decode is a one-line error."""
    iterator = iter(dataset)
    number = 0
    while True:
        number += 1
        try:
            row = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise DataFormatError(source, number, "not valid UTF-8; re-encode the data as UTF-8") from None
        except Exception as exc:  # noqa: BLE001 - arrow raises many types for a row it cannot read
            raise DataFormatError(source, number, f"unreadable row: {_reason(exc)}") from None
        yield number, row


def load_split(path: Path, options: Mapping[str, Any]) -> tuple[Any, str]:
    """(the `datasets.Dataset`, a name for messages) of one split."""
    import datasets

    if path.name.startswith(DATASET_SPLIT_PREFIX):
        split = path.name[len(DATASET_SPLIT_PREFIX):]
        where = options.get("path")
        if not where:
            raise MtbioError(f"{path.name}: a dataset split needs reader_options.path (a hub id or a directory)")
        local = path.parent / where
        source = f"{where}:{split}"
        try:
            if (local / "dataset_dict.json").is_file():
                return datasets.load_from_disk(str(local))[split], source
            return datasets.load_dataset(str(local) if local.exists() else where, options.get("name"),
                                         revision=options.get("revision"), split=split), source
        except Exception as exc:  # noqa: BLE001 - the hub, the cache and the builders raise many types
            hint = ("; a hub dataset is read from the cache only while HF_DATASETS_OFFLINE=1 (mtbio's default, "
                    "so local files never wait on a network): set HF_DATASETS_OFFLINE=0 to download it"
                    if datasets.config.HF_HUB_OFFLINE and not local.exists() else "")
            raise MtbioError(f"dataset '{where}' split '{split}' could not be loaded: {_reason(exc)}{hint}") from None
    source = str(path)
    try:
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                raise MtbioError(f"{path}: a DatasetDict; name one of its splits with \"hf:<split>\" and "
                                 "reader_options.path")
            return loaded, source
        builder = options.get("path") or BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise MtbioError(f"{path}: unknown file type; set reader_options.path to a datasets builder "
                             f"({', '.join(sorted(set(BUILDERS.values())))})")
        extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" and builder == "csv" else {}
        return datasets.load_dataset(builder, data_files=str(path), split="train", **extra), source
    except MtbioError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise MtbioError(f"{path}: could not be loaded as a dataset: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:240]}" if text else type(exc).__name__


def _from_columns(dataset: Any, task: TaskDef, source: str) -> Iterator[Example]:
    columns = {key: [str(n) for n in name] if isinstance(name, list) else str(name)
               for key, name in task.columns.items()}
    missing = [n for name in columns.values() for n in (name if isinstance(name, list) else [name])
               if n not in dataset.column_names]
    if missing:
        raise DataFormatError(source, None, f"no field(s) {', '.join(missing)} (fields: "
                                            f"{', '.join(dataset.column_names)})")
    names = label_names(dataset.features.get(columns["label"]))
    for row_number, row in rows(dataset, source):
        values = {key: [row[n] for n in name] if isinstance(name, list) else row[name] for key, name in columns.items()}
        label = _label(values["label"], names, source, row_number)
        for key in ("id", "group"):
            if key in values and not isinstance(values[key], (str, int)):
                raise DataFormatError(source, row_number, f"field '{columns[key]}' must be a string")
        yield Example(
            uid=str(values["id"]) if "id" in values else f"{Path(source).name}:{row_number}",
            label=label,
            inputs=input_values(task, values, source, row_number),
            group=str(values["group"]) if "group" in values else None,
            origin=f"{source}:{row_number}",
        )


def label_names(feature: Any) -> list[str] | None:
    """The class names of a ClassLabel feature (or of a sequence of them), else None."""
    inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel) for tags and multi-label fields
    if isinstance(inner, list) and inner:
        inner = inner[0]
    names = getattr(inner, "names", None)
    return list(names) if names else None


def _label(value: Any, names: list[str] | None, source: str, row: int) -> Label:
    """A raw label: a class name, a number (regression), or a list of names (tags, multi-label)."""
    if isinstance(value, list):
        return [str(_one(v, names, source, row)) for v in value]
    return _one(value, names, source, row)


def _one(item: Any, names: list[str] | None, source: str, row: int) -> Any:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        if names is None:
            return str(item)
        if not 0 <= item < len(names):
            raise DataFormatError(source, row, f"class index {item} outside the {len(names)} class names")
        return names[item]
    return item
