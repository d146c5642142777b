"""Property-based tests: every reader, and predict's input reader, fed random and mutated files,
fails only with a clear DataFormatError/MtbioError — never another exception.

The seeds are the fixture files in tests/fixtures/data (each format's standard layout); each
generated input is either a byte-level mutation of a seed (flipped, inserted, deleted or
duplicated bytes and lines, truncation) or random bytes or text.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtbio.data.readers import READERS
from mtbio.errors import MtbioError
from mtbio.experiments.predict import read_inputs
from mtbio.tasks.loading import load_catalog
from mtbio.tasks.schema import TaskDef

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "data"
EXAMPLES_PER_READER = 200
FUZZ = settings(max_examples=EXAMPLES_PER_READER, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

# one shipped task per format, plus user-style definitions for the formats no shipped task uses
TASK_FOR_FORMAT = {"ade": "ade", "brat": "chia", "chemprot_jsonl": "chemprot", "conll": "bc5cdr-chem",
                   "csv": "mqp", "hoc": "hoc", "jsonl": "mednli", "mediqa_rqe_xml": "mediqa-rqe",
                   "nli4ct": "nli4ct", "pubmedqa": "pubmedqa", "tsv": "ddi",
                   # no shipped task reads `hf`: a pair task over a JSON-lines file, as a user writes one
                   "hf": TaskDef(name="hf-pairs", type="classification", format="hf", files={"train": "hf/train.jsonl"},
                                 columns={"id": "id", "text": "question", "text_b": "answer", "label": "label"},
                                 labels=["yes", "no"], metric="accuracy")}


def test_every_reader_is_fuzzed() -> None:
    assert set(READERS.names()) == set(TASK_FOR_FORMAT)


@st.composite
def mutations(draw: st.DrawFn, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "line", "special"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[at:]
        elif op == "line":  # duplicate or drop a whole line
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = draw(st.sampled_from([[lines[i], lines[i]], [], [b""], [lines[i] + b"\t"]]))
            data = bytearray(b"\n".join(lines))
        else:  # characters that formats give meaning to
            data[at:at] = draw(st.sampled_from([b"\t", b"\n", b"\r\n", b'"', b"{", b"}", b"[", b"<", b"\xef\xbb\xbf",
                                                b"\xff", b"\x00", b"-DOCSTART-", b"nan", b"1e999", b" ", b",", b"T1\t"]))
    return bytes(data)


def inputs(seed: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(mutations(seed), st.binary(max_size=300), st.text(max_size=300).map(lambda s: s.encode()))


def _target(task: TaskDef, root: Path) -> tuple[Path, Path]:
    """(path given to the reader, file the fuzzer rewrites) inside a copy of the fixtures."""
    files = task.files.get("train") or task.files.get("all")
    first = files[0] if isinstance(files, list) else files
    source = FIXTURE_DATA / first
    if source.is_dir():  # brat: a directory of .txt/.ann pairs; rewrite one .ann
        shutil.copytree(source, root / "data")
        return root / "data", sorted((root / "data").glob("*.ann"))[0]
    shutil.copytree(source.parent, root / "data")
    return root / "data" / source.name, root / "data" / source.name


@pytest.mark.parametrize("fmt", sorted(TASK_FOR_FORMAT))
def test_reader_fails_only_clearly(fmt: str, tmp_path: Path) -> None:
    named = TASK_FOR_FORMAT[fmt]
    task = named if isinstance(named, TaskDef) else load_catalog().get(named)
    assert task.format == fmt
    read_path, rewritten = _target(task, tmp_path)
    reader = READERS.get(fmt)
    seed = rewritten.read_bytes()[:20_000]
    seen = {"n": 0}

    @FUZZ
    @given(content=inputs(seed))
    def check(content: bytes) -> None:
        seen["n"] += 1
        rewritten.write_bytes(content)
        try:
            for _ in reader(read_path, task):
                pass
        except MtbioError:
            pass

    check()
    assert seen["n"] >= EXAMPLES_PER_READER


def test_predict_input_reader_fails_only_clearly(tmp_path: Path) -> None:
    path = tmp_path / "inputs.txt"
    seed = "Aspirin increases @DRUG$ levels .\nNo effect of @DRUG$ on @DRUG$ .\nfirst text\tsecond text\n".encode()
    seen = {"n": 0}

    @FUZZ
    @given(content=inputs(seed))
    def check(content: bytes) -> None:
        seen["n"] += 1
        path.write_bytes(content)
        try:
            lines = read_inputs(path)
        except MtbioError:
            return
        assert lines and all(line.strip() for line in lines)  # accepted input has no empty line

    check()
    assert seen["n"] >= EXAMPLES_PER_READER
