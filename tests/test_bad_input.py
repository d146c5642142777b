"""Bad input through the CLI: one clear line naming the file (and line) and the fix, exit status 2,
never a traceback and never silently dropped data."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main

GOOD_DEF = """name: mytask
type: classification
format: tsv
columns: {text: 0, label: 1}
files: {train: t/train.tsv, dev: t/dev.tsv}
labels: ["yes", "no"]
metric: accuracy
"""
ROWS = "".join(f"text number {i}\t{'yes' if i % 2 else 'no'}\n" for i in range(16))


def _refine(tmp_path: Path, encoder: str, definition: str = GOOD_DEF, train: str | bytes = ROWS,
            dev: str | bytes = ROWS, *extra: str) -> tuple[int, str]:
    defs, data = tmp_path / "defs", tmp_path / "data" / "t"
    defs.mkdir(exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    (defs / "mytask.yml").write_text(definition)
    for name, content in (("train.tsv", train), ("dev.tsv", dev)):
        (data / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    result = CliRunner().invoke(main, ["refine", "--tasks", "mytask", "--task-defs", str(defs), "--data-dir",
                                       str(tmp_path / "data"), "--encoder", encoder, "--output", str(tmp_path / "run"),
                                       "--max-steps", "1", "--batch-size", "4", *extra])
    return result.exit_code, result.output


CASES = {
    "yaml syntax": dict(definition=GOOD_DEF + "labels: [a\n", expect=r"defs/mytask.yml: task 'mytask': line 9: "),
    "unknown field": dict(definition=GOOD_DEF + "colour: red\n", expect=r"defs/mytask.yml: task 'mytask': field 'colour'"),
    "unquoted yes/no": dict(definition=GOOD_DEF.replace('["yes", "no"]', "[yes, no]"),
                            expect=r"field 'labels.0': .*YAML reads unquoted yes/no.*quote it", lines=2),
    "wrong field count": dict(train=ROWS + "only one field\n", expect=r"t/train.tsv:17: expected 2 fields"),
    "empty train split": dict(train="", expect=r"t/train.tsv: no rows"),
    "empty dev split": dict(dev="", expect=r"t/dev.tsv: no rows"),
    "label not in the definition": dict(train=ROWS + "some text\tmaybe\n",
                                        expect=r"t/train.tsv:17: label 'maybe' is not among the labels"),
    "non-UTF-8 bytes": dict(train=ROWS.encode() + b"caf\xe9\tyes\n",
                            expect=r"t/train.tsv:17: not valid UTF-8 .*re-encode the file as UTF-8"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_training_input_is_one_clear_line(case: str, tmp_path: Path, tiny_encoder: str) -> None:
    spec = dict(CASES[case])
    expect, lines = spec.pop("expect"), spec.pop("lines", 1)  # one line per problem
    code, output = _refine(tmp_path, tiny_encoder, **spec)
    assert code == 2, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == lines, output
    assert re.search(expect, errors[0]), errors[0]


def test_unknown_encoder_is_one_clear_line(tmp_path: Path) -> None:
    code, output = _refine(tmp_path, "no-such-org/no-such-model")
    assert code == 2 and "Traceback" not in output
    assert "error: encoder 'no-such-org/no-such-model' is neither a local directory nor in the Hugging Face cache" in output


def test_texts_longer_than_the_model_are_truncated_and_counted(tmp_path: Path, tiny_encoder: str) -> None:
    long_rows = "".join(f"{'word ' * 300}number {i}\t{'yes' if i % 2 else 'no'}\n" for i in range(16))
    # a task's max_length 300 is more than the tiny encoder's 128 positions: truncated to 128, not a crash
    code, output = _refine(tmp_path, tiny_encoder, GOOD_DEF + "max_length: 300\n", long_rows, long_rows)
    assert code == 0, output
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["truncated"]["mytask"] == {"train": 16, "dev": 16}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    tmp = tmp_path_factory.mktemp("bad-input-run")
    code, output = _refine(tmp, tiny_encoder)
    assert code == 0, output
    return tmp / "run"


@pytest.mark.parametrize("content, expect", [
    (b"first input\n\nthird input\n", r"inputs.txt:2: empty line; remove it"),
    (b"   \n", r"inputs.txt:1: empty line"),
    (b"", r"inputs.txt: no inputs \(the file is empty\)"),
    (b"ok\ncaf\xe9\n", r"inputs.txt:2: not valid UTF-8 .*re-encode the file as UTF-8"),
])
def test_bad_predict_input_is_one_clear_line(content: bytes, expect: str, tmp_path: Path, tiny_run: Path) -> None:
    inputs = tmp_path / "inputs.txt"
    inputs.write_bytes(content)
    result = CliRunner().invoke(main, ["predict", str(tiny_run), "--task", "mytask", "--input", str(inputs),
                                       "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error: ")]
    assert re.search(expect, line), line
    assert not (tmp_path / "out.jsonl").exists()


def test_predict_keeps_every_input_line(tmp_path: Path, tiny_run: Path) -> None:
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("one\ntwo\nthree\n")
    result = CliRunner().invoke(main, ["predict", str(tiny_run), "--task", "mytask", "--input", str(inputs),
                                       "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["input"] for r in rows] == ["one", "two", "three"] and all(r["prediction"] in ("yes", "no") for r in rows)
