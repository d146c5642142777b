"""From a task definition and a data directory to checked `Example`s for one split.

    examples = read_split(task, "train", data_dir)

`read_split` reads the split's files with the task's reader, applies `label_map`, and checks
every label (class in `label_list`, tags in the tag set, a finite float for regression); a bad
label raises `DataFormatError` naming the example's file and line. Corpora without an official
split (`files: {all: ...}` + `derived_split`) are split by document: see `derived_split_of`.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from mtbio.data.example import Example, Label
from mtbio.data.split_cache import cached, code_fingerprint
from mtbio.data.readers import READERS
from mtbio.errors import DataFormatError, MissingDataError, MtbioError
from mtbio.tasks.loading import is_dataset_split, split_paths
from mtbio.tasks.schema import SPLITS, DerivedSplit, TaskDef


def read_split(task: TaskDef, split: str, data_dir: Path | str, max_examples: int | None = None) -> list[Example]:
    """The checked examples of `split` ("train", "dev" or "test"), in file order.

    A uid repeated within a split (BLUE's i2b2-2010 repeats a pair's index for each of its
    labels) gets a suffix, `#2`, `#3`..., so uids are unique.

    `max_examples` keeps a deterministic subset: the examples whose sha256(uid) sort first,
    returned in file order. The subset does not depend on file order, and a smaller subset is
    always contained in a larger one.
    """
    if split not in SPLITS:
        raise MtbioError(f"unknown split '{split}' (use {', '.join(SPLITS)})")
    if split not in task.has_splits:
        raise MtbioError(f"task '{task.name}' has no '{split}' split (it has: {', '.join(task.has_splits)})")
    data_dir = Path(data_dir)
    paths = split_paths(task, split, data_dir)
    _require(task, split, paths)
    if max_examples is not None and max_examples < 0:
        raise MtbioError(f"max_examples must be >= 0, got {max_examples}")

    def read() -> list[Example]:
        examples = _read_files(task, paths)
        if task.derived_split is not None:
            examples = [ex for ex in examples if derived_split_of(ex, task.derived_split) == split]
        return examples if max_examples is None else _subset(examples, max_examples)

    rows = _cached(task, paths, lambda: [asdict(ex) for ex in read()], split=split, max_examples=max_examples)
    return [Example(**row) for row in rows]


def split_warnings(task: TaskDef, split: str, examples: list[Example]) -> list[str]:
    """What reads cleanly but is likely a mistake in a split's checked examples, a line each: the kind's notes on
    labels (`TaskKind.label_notes`: how often, and the first example's place) and, in train, the labels of the task
    that no example holds (`TaskKind.missing_labels`: a head never shown them does not learn them)."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for ex in examples:
        for note in task.kind.label_notes(task, ex.label) if ex.label is not None else ():
            counts[note] += 1
            first.setdefault(note, ex.origin or ex.uid)
    lines = [f"task '{task.name}' {split}: {note}: {n} time{'s' if n != 1 else ''}, first in {first[note]}"
             for note, n in counts.items()]
    missing = task.kind.missing_labels(task, [ex.label for ex in examples if ex.label is not None]) \
        if split == "train" and examples else []
    if missing:
        names = ", ".join(f"'{name}'" for name in missing)
        lines.append(f"task '{task.name}' train: label{'s' if len(missing) > 1 else ''} {names} "
                     f"occur{'' if len(missing) > 1 else 's'} in none of its {len(examples)} training examples; the "
                     f"head cannot learn to predict {'them' if len(missing) > 1 else 'it'}")
    return lines


def split_sizes(task: TaskDef, data_dir: Path | str) -> dict[str, int]:
    """Number of examples per split whose files are all present (missing splits are absent)."""
    data_dir = Path(data_dir)
    if task.derived_split is not None:
        paths = split_paths(task, "train", data_dir)
        if not paths or any(not p.exists() and not is_dataset_split(p) for p in paths):
            return {}
        rule = task.derived_split
        counts = _cached(task, paths, lambda: Counter(derived_split_of(ex, rule) for ex in _read_files(task, paths)),
                         count="derived")
        return {s: counts.get(s, 0) for s in SPLITS}
    sizes = {}
    for split in task.has_splits:
        paths = split_paths(task, split, data_dir)
        if paths and all(p.exists() or is_dataset_split(p) for p in paths):
            sizes[split] = _cached(task, paths, lambda: len(_read_files(task, paths)), split=split, count=True)
    return sizes


def derived_split_of(example: Example, rule: DerivedSplit) -> str:
    """train/dev/test for an example of a corpus without an official split.

    u = the first 8 bytes of sha256("<seed>:<group>") as a fraction in [0, 1); train if
    u < train, dev if u < train + dev, else test. `group` is the document id (the uid when an
    example has none), so a document never straddles two splits, and the assignment depends
    only on the seed and the id: not on file order, the machine or PYTHONHASHSEED.
    """
    key = example.group if example.group is not None else example.uid
    digest = hashlib.sha256(f"{rule.seed}:{key}".encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < rule.train:
        return "train"
    if u < rule.train + rule.dev:
        return "dev"
    return "test"


def _require(task: TaskDef, split: str, paths: list[Path]) -> None:
    missing = [p for p in paths if not p.exists() and not is_dataset_split(p)]
    if missing:
        hint = f"; {task.access}" if task.access else ""
        raise MissingDataError(
            f"task '{task.name}': {split} data missing: put it at {', '.join(str(p) for p in missing)}{hint}"
        )


def _read_files(task: TaskDef, paths: list[Path]) -> list[Example]:
    reader = READERS.get(task.format)
    check = _LabelCheck(task)
    examples: list[Example] = []
    seen: Counter[str] = Counter()
    for path in paths:
        for ex in reader(path, task):
            ex.label = check(ex)
            seen[ex.uid] += 1
            if seen[ex.uid] > 1:  # e.g. BLUE i2b2 repeats a pair's index for each of its labels
                ex.uid = f"{ex.uid}#{seen[ex.uid]}"
            examples.append(ex)
    return examples


def _cached(task: TaskDef, paths: list[Path], compute: Callable[[], Any], **what: object) -> Any:
    """`compute()` through the read cache, keyed by the files, the task definition, `what` was read and the code;
    uncached when a path is a `datasets` split (that library keeps its own cache)."""
    if any(is_dataset_split(p) for p in paths):
        return compute()
    identity = {"task": task.model_dump(mode="json"), **what,
                "code": code_fingerprint("mtbio.data.readers", "mtbio.data.loading", "mtbio.data.example")}
    return cached(task.name, identity, paths, compute)


def _subset(examples: list[Example], n: int) -> list[Example]:
    if n >= len(examples):
        return examples
    ranked = sorted(range(len(examples)), key=lambda i: hashlib.sha256(examples[i].uid.encode("utf-8")).digest())
    keep = sorted(ranked[:n])
    return [examples[i] for i in keep]


class _LabelCheck:
    """Checks an example's label as its task's kind says (`TaskKind.check_label`), each raw label mapped through
    `label_map` and checked against the task's vocabulary; a problem is one error naming the file and line."""

    def __init__(self, task: TaskDef):
        self.task = task
        self.allowed = frozenset(task.label_list)
        self.label_map = task.label_map

    def __call__(self, ex: Example) -> Label:
        if ex.label is None:
            self._fail(ex, "no label")
        try:
            return self.task.kind.check_label(ex.label, ex, self.task, self._one)
        except ValueError as error:
            self._fail(ex, str(error))

    def _one(self, raw: Any, what: str = "label") -> str:
        if not isinstance(raw, str):
            raise ValueError(f"expected a string label, got {raw!r}")
        label = self.label_map.get(raw, raw)
        if label not in self.allowed:
            mapped = f" (mapped from '{raw}')" if label != raw else ""
            raise ValueError(f"{what} '{label}'{mapped} is not among the labels of task '{self.task.name}': "
                             f"{', '.join(self.task.label_list)}")
        return label

    def _fail(self, ex: Example, message: str) -> NoReturn:
        path, _, line = ex.origin.rpartition(":")
        if path and line.isdigit():
            raise DataFormatError(path, int(line), message)
        raise DataFormatError(ex.origin, None, message)
