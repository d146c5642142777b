"""Examples → tokenized features (a `datasets.Dataset`), tag decoding, and an on-disk feature cache.

Shared columns: `input_ids`, `attention_mask`, `token_type_ids` (when the tokenizer makes them),
`length` (tokens) and `truncated` (bool). The task's kind (`mtbio.tasks.kinds`) adds `labels` and its
own columns, building them with the helpers here: `text_columns` for kinds that read text (one text
or a pair), `word_columns` for kinds that tag words (`word_index`: per token, the index of the word
whose first sub-word this is, else -1; `n_words`; one label id per token, -100 everywhere except
first sub-words).

Several encodings per example are **segments**, one mechanism for three uses: a long text's windows
(`sliding_window`: long texts are otherwise truncated, never dropped; pairs longest_first), a text paired with each
text of a list (`segment_columns`: a question with each candidate answer) and a pair's two texts each encoded on its
own (`separate_text_columns`: a bi-encoder's). A row holds its segments' tokens end to end, unpadded, and a
`segment_lengths` column (SEGMENT_LENGTHS) their lengths; `mtbio.data.collate` lays each segment of a batch out in a
slot as wide as the batch's longest segment and gives that width as the batch's `window` (WINDOW), and
`mtbio.model.windows` encodes each segment as a text of its own and pools each (`pool_segments`).
`featurize_stats(dataset)` reports how many examples were truncated, how many tagging words lost every sub-word
(decoding tags those "O"; they still count in the metric) and, for a kind that counts them in a `labels_lost`
column (`LABELS_LOST`: per example, the labels the cut removed: a span's answer, a tagged entity), how many labels
the cut took away.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from mtbio.data.example import Example
from mtbio.data.readers import is_pair_task
from mtbio.data.split_cache import code_fingerprint, default_cache_dir
from mtbio.errors import DataFormatError, MtbioError
from mtbio.fileio import WriteError, writing
from mtbio.logs import bars_enabled
from mtbio.tasks.schema import TaskDef

if TYPE_CHECKING:
    from datasets import Dataset, Features

log = logging.getLogger(__name__)

# Bump whenever the features for the same inputs change; it is part of the cache key.
FEATURIZER_VERSION = 3  # 2: pair-ness from the reader (NLI4CT, MEDIQA-RQE, PubMedQA gained their text_b); 3: segments
IGNORE_INDEX = -100
SEGMENT_LENGTHS = "segment_lengths"  # a row's column: the tokens of each of its segments, end to end in the row
WINDOW = "window"  # a batch's column (`mtbio.data.collate`): the width of the slot each segment is laid out in
_CHUNK = 2048  # examples per tokenizer call: batched for speed, bounded for memory
LABELS_LOST = "labels_lost"  # a kind's optional column: per example, how many of its labels the cut removed


@dataclass(frozen=True)
class FeatureStats:
    """What truncation cost: examples truncated, tagging words left without any token, and labels the cut removed
    (where the kind counts them)."""

    examples: int
    truncated: int
    words: int = 0
    words_lost: int = 0
    labels_lost: int = 0

    def __str__(self) -> str:
        text = f"{self.truncated} of {self.examples} examples truncated"
        if self.words:
            text += f"; {self.words_lost} of {self.words} words lost (scored as 'O')"
        return text


def featurize(
    examples: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int | None = None
) -> Dataset:
    """Tokenize `examples` for `task` (batched fast-tokenizer calls) into a `datasets.Dataset`."""
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo

    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("featurize needs a fast (Rust) tokenizer: word_ids() is used for tag alignment")
    max_length = effective_max_length(task, tokenizer, max_length)
    columns: dict[str, list[Any]] = {}
    chunks = range(0, len(examples), _CHUNK)
    for start in tqdm(chunks, desc=f"tokenize {task.name}", unit="chunk", leave=False, disable=len(chunks) < 4 or not bars_enabled()):
        chunk = examples[start : start + _CHUNK]
        part = task.kind.featurize(chunk, task, tokenizer, max_length)
        for key, values in part.items():
            columns.setdefault(key, []).extend(values)
    if not columns:  # no examples: still give the schema
        columns = {name: [] for name in _features(task, tokenizer)}
    features = _features(task, tokenizer)
    # straight to Arrow: Dataset.from_dict encodes every value in Python (a third of the time)
    dataset = Dataset(pa.Table.from_pydict(columns, schema=features.arrow_schema), info=DatasetInfo(features=features))
    return dataset


def featurize_stats(dataset: Dataset) -> FeatureStats:
    """Truncation counts of a featurized dataset (fresh or loaded from the cache)."""
    import pyarrow.compute as pc

    table = dataset.data
    truncated = pc.sum(table.column("truncated")).as_py() or 0
    lost = (pc.sum(table.column(LABELS_LOST)).as_py() or 0) if LABELS_LOST in dataset.column_names else 0
    if "word_index" not in dataset.column_names:
        return FeatureStats(examples=len(dataset), truncated=truncated, labels_lost=lost)
    words = pc.sum(table.column("n_words")).as_py() or 0
    kept = pc.sum(pc.greater_equal(pc.list_flatten(table.column("word_index")), 0)).as_py() or 0
    return FeatureStats(examples=len(dataset), truncated=truncated, words=words, words_lost=words - kept,
                        labels_lost=lost)


def decode_tags(
    token_predictions: Sequence[int], word_index: Sequence[int], n_words: int, label_list: Sequence[str]
) -> list[str]:
    """Per-token predicted ids → one tag per word (from its first sub-word; 'O' for words lost).

    `token_predictions` may be longer than `word_index` (batch padding); the extra is ignored.
    """
    index = np.asarray(word_index, dtype=np.int64)
    preds = np.asarray(token_predictions, dtype=np.int64)[: len(index)]
    first = index >= 0
    tags = np.full(n_words, "O", dtype=object)
    tags[index[first]] = np.asarray(label_list, dtype=object)[preds[first]]
    return tags.tolist()


# ---------------------------------------------------------------------------------------- internals


def effective_max_length(task: TaskDef, tokenizer: Any, max_length: int | None) -> int:
    """The length texts are cut at: --max-length, else the task's, capped by what the encoder can take; MtbioError
    where a task's windows (`sliding_window`) cannot repeat their stride at that length."""
    length = max_length if max_length is not None else task.max_length
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        length = min(length, model_max)
    window = task.sliding_window
    if window is not None and not window.fits(length):
        source = f"--max-length {length}" if length == max_length else f"the encoder's limit of {length} tokens"
        raise MtbioError(f"{source}: task '{task.name}' reads windows that repeat sliding_window.stride "
                         f"{window.stride} tokens, half a window or more at that length; give a max_length of at "
                         f"least {2 * window.stride + 2}, or a smaller stride")
    return length


def _features(task: TaskDef, tokenizer: Any) -> Features:
    from datasets import Features, List, Value

    ids = List(Value("int32"))
    spec: dict[str, Any] = {"input_ids": ids, "attention_mask": List(Value("int8"))}
    if "token_type_ids" in tokenizer.model_input_names:
        spec["token_type_ids"] = List(Value("int8"))
    kind = task.kind.features(tokenizer)
    spec["labels"] = kind.pop("labels")
    spec["length"] = Value("int32")
    spec["truncated"] = Value("bool")
    if task.sliding_window is not None:
        spec.update(segment_features())
    spec.update(kind)
    return Features(spec)


def _encode(tokenizer: Any, first: list[Any], second: list[str] | None, max_length: int, words: bool,
            offsets: bool = False, stride: int | None = None) -> Any:
    """The tokenizer's encoding; with a `stride`, every window of each text (`overflow_to_sample_mapping`)."""
    windows = {} if stride is None else {"return_overflowing_tokens": True, "stride": stride}
    return tokenizer(
        first,
        second,
        truncation="longest_first" if second is not None else True,
        max_length=max_length,
        is_split_into_words=words,
        return_attention_mask=True,
        return_offsets_mapping=offsets,
        **windows,
    )


def _window_columns(encoded: Any, count: int, task: TaskDef) -> tuple[dict[str, list[Any]], list[list[int]]]:
    """The shared columns of `count` texts encoded in windows (`_encode` with a stride): each row its text's windows
    as segments; and, per text, the encoding rows it kept."""
    window = task.sliding_window
    assert window is not None
    rows: list[list[int]] = [[] for _ in range(count)]
    for row, sample in enumerate(encoded["overflow_to_sample_mapping"]):
        rows[sample].append(row)
    kept = [rows_of[:window.max_windows] for rows_of in rows]
    columns = _joined(encoded, kept)
    columns["truncated"] = [len(rows_of) > window.max_windows for rows_of in rows]
    return columns, kept


def _joined(encoded: Any, rows: list[list[int]]) -> dict[str, list[Any]]:
    """Per example, the encoding rows `rows[i]` as its segments: their tokens end to end, their lengths, `length`."""
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in encoded]
    columns: dict[str, list[Any]] = {name: [[v for row in mine for v in encoded[name][row]] for mine in rows]
                                     for name in names}
    columns[SEGMENT_LENGTHS] = [[len(encoded["input_ids"][row]) for row in mine] for mine in rows]
    columns["length"] = [len(ids) for ids in columns["input_ids"]]
    return columns


def _base_columns(encoded: Any) -> dict[str, list[Any]]:
    columns = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if "token_type_ids" in encoded:
        columns["token_type_ids"] = encoded["token_type_ids"]
    columns["length"] = [len(ids) for ids in encoded["input_ids"]]
    columns["truncated"] = [bool(enc.overflowing) for enc in encoded.encodings]
    return columns


def text_columns(chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int,
                 offsets: bool = False) -> tuple[dict[str, list[Any]], Any]:
    """The shared columns of examples that hold text (and `text_b` for pair tasks), and the tokenizer's
    encoding (with character offsets where `offsets`). Labels are the kind's to add."""
    pair = is_pair_task(task)
    for ex in chunk:
        if ex.text is None or (pair and ex.text_b is None):
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' has no text" + (
                " pair" if pair else ""))
        if ex.text_b is not None and not pair:
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' has a second "
                                  "text (text_b) that a single-text task would drop; name it in columns: {text_b: ...}")
        if ex.tokens is not None:
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' has words "
                                  f"(tokens), which a {task.type} task does not read")
    second = [ex.text_b for ex in chunk] if pair else None
    if task.sliding_window is not None:
        if pair or offsets:
            raise MtbioError(f"task '{task.name}': sliding_window reads single texts without positions, and this "
                             "task's " + ("reader gives pairs" if pair else "kind reads character offsets"))
        encoded = _encode(tokenizer, [ex.text for ex in chunk], None, max_length, words=False,
                          stride=task.sliding_window.stride)
        return _window_columns(encoded, len(chunk), task)[0], encoded
    encoded = _encode(tokenizer, [ex.text for ex in chunk], second, max_length, words=False, offsets=offsets)
    return _base_columns(encoded), encoded


def separate_text_columns(chunk: Sequence[Example], task: TaskDef, tokenizer: Any,
                          max_length: int) -> dict[str, list[Any]]:
    """The shared columns of a pair task's examples with each of its two texts encoded on its own (a bi-encoder's
    input): the text and `text_b` as the row's two segments; `truncated` is either's."""
    if not is_pair_task(task):
        raise ValueError(f"task '{task.name}' is not a pair task")
    text_columns(chunk, task, tokenizer, max_length)  # the same checks of each example's texts
    encoded = _encode(tokenizer, [text for ex in chunk for text in (ex.text, ex.text_b)], None, max_length,
                      words=False)
    columns = _joined(encoded, [[2 * i, 2 * i + 1] for i in range(len(chunk))])
    columns["truncated"] = [bool(encoded.encodings[2 * i].overflowing or encoded.encodings[2 * i + 1].overflowing)
                            for i in range(len(chunk))]
    return columns


def segment_columns(chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int,
                    field: str = "segments") -> dict[str, list[Any]]:
    """The shared columns of examples that hold a text and a list of texts (the input field `field`: a question's
    candidate answers): each (text, item) pair encoded as a pair and kept as one of the row's segments (the model
    encodes each on its own; `mtbio.model.windows.pool_segments` pools each). `truncated` is any pair's."""
    if task.sliding_window is not None:
        raise MtbioError(f"task '{task.name}': sliding_window cuts single texts, and this task's rows hold segments")
    for ex in chunk:
        segments = ex.inputs.get(field)
        if ex.text is None or not isinstance(segments, list) or not segments:
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' needs a text "
                                  f"and a non-empty list of texts in '{field}'")
    counts = [len(ex.inputs[field]) for ex in chunk]
    encoded = _encode(tokenizer, [ex.text for ex, n in zip(chunk, counts) for _ in range(n)],
                      [segment for ex in chunk for segment in ex.inputs[field]], max_length, words=False)
    starts = np.cumsum([0] + counts).tolist()
    rows = [list(range(start, start + count)) for start, count in zip(starts, counts)]
    columns = _joined(encoded, rows)
    columns["truncated"] = [any(encoded.encodings[row].overflowing for row in mine) for mine in rows]
    return columns


def segment_features() -> dict[str, Any]:
    """The `datasets` features of the segments' own column (SEGMENT_LENGTHS)."""
    from datasets import List, Value

    return {SEGMENT_LENGTHS: List(Value("int32"))}


def word_columns(chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
    """The shared columns of examples that hold words, with `word_index`, `n_words` and one label id per token
    (the word's tag on its first sub-word, -100 elsewhere and for unlabelled examples)."""
    index = label_index(task)
    for ex in chunk:
        if ex.tokens is None:
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' has no tokens")
        if ex.text is not None or ex.text_b is not None:
            raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' has text, "
                                  f"which a {task.type} task does not read (it reads words: tokens)")
        if ex.label is not None and (not isinstance(ex.label, list) or len(ex.label) != len(ex.tokens)):
            raise DataFormatError(ex.origin or ex.uid, None,
                                  f"task '{task.name}': example '{ex.uid}' needs one tag per token")
    stride = task.sliding_window.stride if task.sliding_window is not None else None
    encoded = _encode(tokenizer, [ex.tokens for ex in chunk], None, max_length, words=True, stride=stride)
    if stride is None:
        columns, rows = _base_columns(encoded), [[i] for i in range(len(chunk))]
    else:
        columns, rows = _window_columns(encoded, len(chunk), task)
    labels, word_index = [], []
    for i, ex in enumerate(chunk):
        tags = None if ex.label is None else [lookup(index, t, ex, task) for t in ex.label]  # type: ignore[union-attr]
        row_index, row_labels, seen = [], [], -1  # a word is tagged from the first window holding its first sub-word
        for row in rows[i]:
            previous, ids = None, encoded.word_ids(row)
            for word in ids:
                if word is None or word == previous or word <= seen:
                    row_index.append(-1)
                    row_labels.append(IGNORE_INDEX)
                else:
                    row_index.append(word)
                    row_labels.append(IGNORE_INDEX if tags is None else tags[word])
                previous = word
            seen = max([seen] + [w for w in ids if w is not None])
        word_index.append(row_index)
        labels.append(row_labels)
    columns["labels"] = labels
    columns["word_index"] = word_index
    columns["n_words"] = [len(ex.tokens) for ex in chunk]  # type: ignore[arg-type]
    return columns


def word_features() -> dict[str, Any]:
    """The `datasets` features of `word_columns`' labels and own columns."""
    from datasets import List, Value

    return {"labels": List(Value("int64")), "word_index": List(Value("int32")), "n_words": Value("int32")}


def label_index(task: TaskDef) -> dict[str, int]:
    """Label → the head's output index."""
    return {name: i for i, name in enumerate(task.label_list)}


def lookup(index: dict[str, int], label: Any, ex: Example, task: TaskDef) -> int:
    try:
        return index[label]
    except KeyError:
        raise DataFormatError(ex.origin or ex.uid, None,
                              f"task '{task.name}': label '{label}' is not one of {list(index)}") from None


# ------------------------------------------------------------------------------------------- cache


def examples_fingerprint(examples: Iterable[Example]) -> str:
    """A short hash of what examples hold (for data that is not a file, such as a dataset split): every input
    field, the shipped ones first in their old places (so that their hashes, and the caches they name, stay)."""
    digest = hashlib.sha256()
    for ex in examples:
        shipped = [ex.inputs.get(name) for name in _SHIPPED_INPUTS]
        others = [[name, value] for name, value in sorted(ex.inputs.items()) if name not in _SHIPPED_INPUTS]
        digest.update(json.dumps([ex.uid, ex.label, *shipped, ex.group, *others]).encode())
    return digest.hexdigest()[:16]


_SHIPPED_INPUTS = ("text", "text_b", "tokens")  # the inputs an example held before kinds declared theirs


def cache_key(task: TaskDef, tokenizer: Any, max_length: int | None, source_fingerprint: str, n_examples: int) -> str:
    """The hash that names a cached feature set."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    identity = {
        "featurizer": FEATURIZER_VERSION,
        "kind": kind_fingerprint(task.kind),  # an edited kind module featurizes anew
        "inputs": [astuple(f) for f in task.kind.inputs.input_fields],  # so does a changed declaration
        "task": task.model_dump(mode="json"),
        "source": source_fingerprint,
        "n_examples": n_examples,
        "max_length": effective_max_length(task, tokenizer, max_length),
        "tokenizer": [
            str(getattr(tokenizer, "name_or_path", "")),
            len(tokenizer),
            type(tokenizer).__qualname__,
            _backend_hash(backend) if backend is not None else "",
        ],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def kind_fingerprint(kind: Any) -> str:
    """A short hash of the source of the modules that define the kind and the kinds it derives from (a class's own
    source where its module has no file, as for a kind defined in a notebook)."""
    parts = []
    for cls in type(kind).__mro__[:-1]:  # without `object`
        try:
            parts.append(code_fingerprint(cls.__module__))
        except (AttributeError, TypeError, ValueError, OSError):
            try:
                parts.append(hashlib.sha256(inspect.getsource(cls).encode()).hexdigest()[:16])
            except (OSError, TypeError):
                parts.append(cls.__qualname__)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _backend_hash(backend: Any) -> str:
    """Hash of the Rust tokenizer (vocab, normalizer, …) without the per-call truncation/padding state."""
    return _spec_hash(backend.to_str())


@functools.lru_cache(maxsize=4)
def _spec_hash(serialized: str) -> str:
    """`_backend_hash` of a serialized tokenizer: kept, since re-sorting a 30k vocabulary costs ~60 ms a call and
    every split of every cell asks (the serialization itself costs ~5 ms)."""
    spec = json.loads(serialized)
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def featurize_cached(
    examples: Sequence[Example],
    task: TaskDef,
    tokenizer: Any,
    max_length: int | None,
    source_fingerprint: str,
    cache_dir: Path | None = None,
) -> Dataset:
    """`featurize`, reusing features saved by an earlier run with the same key (see `cache_key`).

    New features are written to a temporary directory and renamed into place, so a crash or a
    concurrent run never leaves a half-written entry.
    """
    from datasets import load_from_disk

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"{task.name}-{cache_key(task, tokenizer, max_length, source_fingerprint, len(examples))}"
    if target.is_dir():
        try:
            dataset = load_from_disk(str(target))
            if len(dataset) == len(examples):
                log.debug("%s: features loaded from %s", task.name, target)
                return dataset
        except (OSError, ValueError, FileNotFoundError) as error:
            log.warning("%s: ignoring unreadable feature cache %s (%s)", task.name, target, error)
        shutil.rmtree(target, ignore_errors=True)
    dataset = featurize(examples, task, tokenizer, max_length)
    tmp: Path | None = None
    try:
        with writing(root):
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
            dataset.save_to_disk(str(tmp))
            try:
                os.replace(tmp, target)
            except OSError:  # another process won the race (target exists and is non-empty): keep theirs
                if not target.is_dir():
                    raise
    except WriteError as error:  # a cache that cannot be written costs time, not the run
        log.warning("%s: features not cached (%s); set MTBIO_CACHE_DIR to a writable place to reuse them",
                    task.name, error)
        return dataset
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return load_from_disk(str(target))
