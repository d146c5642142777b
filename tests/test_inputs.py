"""Inputs owned by the kinds: a kind declares its input fields, readers map `columns` onto them, and the feature
fingerprint, saved predictions and `mtbio predict` follow the declaration. The worked case is a multiple-choice
kind (a question and its candidate answers, the `segments` field) added as two plugin files,
`tests/fixtures/multiple_choice/`, with no edit of the package."""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from mtbio.data.example import Example
from mtbio.data.featurize import cache_key, examples_fingerprint
from mtbio.data.readers import READERS, reader_problems
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import InputField, Segments

PLUGIN = Path(__file__).parent / "fixtures" / "multiple_choice"
QUIZ = [
    ("Which drug thins the blood?", ["warfarin", "insulin", "salbutamol"], 0),
    ("Which hormone lowers blood glucose?", ["adrenaline", "insulin", "cortisol"], 1),
    ("Which drug opens the airways?", ["metformin", "heparin", "salbutamol"], 2),
    ("Which organ filters the blood?", ["kidney", "skin", "lung"], 0),
]


@pytest.fixture
def quiz_project(tmp_path: Path) -> Path:
    """The plugin's two files, a task definition reading jsonl, and a small hand-made train and dev set."""
    for name in ("multiple_choice.py", "multiple_choice_head.py"):
        shutil.copy(PLUGIN / name, tmp_path / name)
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "quiz.yml").write_text(textwrap.dedent("""
        name: quiz
        type: multiple_choice
        format: jsonl
        columns: {text: question, segments: options, label: answer, id: qid}
        files: {train: quiz/train.jsonl, dev: quiz/dev.jsonl}
        max_length: 24
    """))
    (tmp_path / "data" / "quiz").mkdir(parents=True)
    lines = [json.dumps({"qid": f"q{i}", "question": q, "options": o, "answer": a}) for i, (q, o, a) in
             enumerate(QUIZ * 3)]
    (tmp_path / "data" / "quiz" / "train.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "data" / "quiz" / "dev.jsonl").write_text("\n".join(lines[:4]) + "\n")
    return tmp_path


def _mtbio(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MTBIO_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "mtbio", "--include-package", "multiple_choice", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def plugin_kind() -> Iterator[Any]:
    """The plugin imported into this process, and unregistered afterwards (other tests see the shipped kinds)."""
    from mtbio.evaluation.metrics import METRICS
    from mtbio.tasks.kinds import TASK_KINDS

    sys.path.insert(0, str(PLUGIN))
    try:
        yield importlib.import_module("multiple_choice")
    finally:
        TASK_KINDS.unregister("multiple_choice")
        METRICS.unregister("choice_accuracy")
        sys.modules.pop("multiple_choice", None)
        sys.modules.pop("multiple_choice_head", None)
        sys.path.remove(str(PLUGIN))


def test_a_multiple_choice_kind_in_two_files_trains_and_predicts_its_answer(quiz_project: Path,
                                                                              tiny_encoder: str) -> None:
    trained = _mtbio(["finetune", "--task", "quiz", "--task-defs", "defs", "--data-dir", "data", "--encoder",
                      tiny_encoder, "--max-steps", "3", "--batch-size", "4", "--no-baselines", "--output", "run"],
                     quiz_project)
    assert trained.returncode == 0, trained.stderr[-3000:]
    results = json.loads((quiz_project / "run" / "quiz" / "results.json").read_text())
    assert results["steps"] == 3 and 0.0 <= results["dev"]["quiz"]["choice_accuracy"] <= 1.0

    scored = _mtbio(["evaluate", "run/quiz", "--data-dir", "data", "--save-predictions"], quiz_project)
    assert scored.returncode == 0, scored.stderr[-3000:]
    saved = [json.loads(line) for line in (quiz_project / "run" / "quiz" / "predictions" / "dev-quiz.jsonl").open()]
    assert [r["segments"] for r in saved] == [o for _, o, _ in QUIZ]  # the declared fields, not text/text_b
    assert [r["text"] for r in saved] == [q for q, _, _ in QUIZ] and "text_b" not in saved[0]
    assert [r["gold"] for r in saved] == [a for _, _, a in QUIZ] and all(r["prediction"] in (0, 1, 2) for r in saved)

    (quiz_project / "in.txt").write_text("Which drug thins the blood?\twarfarin\tinsulin\n"
                                         "Which organ filters the blood?\tkidney\tskin\tlung\theart\n")
    predicted = _mtbio(["predict", "run/quiz", "--task", "quiz", "--input", "in.txt", "--scores", "--output",
                        "out.jsonl"], quiz_project)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    records = [json.loads(line) for line in (quiz_project / "out.jsonl").open()]
    for record, candidates in zip(records, (["warfarin", "insulin"], ["kidney", "skin", "lung", "heart"])):
        assert record["answer"] == candidates[record["prediction"]]
        assert len(record["scores"]) == len(candidates) and abs(sum(record["scores"]) - 1) < 1e-5


def _quiz(**changes: Any) -> TaskDef:
    spec = {"name": "quiz", "type": "multiple_choice", "format": "tsv", "files": {"train": "t.tsv"},
            "columns": {"text": "question", "segments": ["a", "b", "c"], "label": "answer"},
            "reader_options": {"header": True}, **changes}
    return TaskDef.model_validate(spec)


def test_table_readers_map_columns_onto_the_declared_fields(plugin_kind: Any, tmp_path: Path) -> None:
    task = _quiz()
    assert reader_problems(task) == []
    path = tmp_path / "t.tsv"
    path.write_text("question\ta\tb\tc\tanswer\nWhich thins the blood?\twarfarin\tinsulin\theparin\t0\n")
    [example] = READERS.get("tsv")(path, task)
    assert example.inputs == {"text": "Which thins the blood?", "segments": ["warfarin", "insulin", "heparin"]}
    assert example.text == "Which thins the blood?" and example.text_b is None
    # what a kind does not declare is not a column, and a required field must be named
    assert reader_problems(_quiz(columns={"text": "question", "text_b": "a", "segments": ["b"], "label": "answer"})) \
        == [("columns.text_b", "format 'tsv' does not use column 'text_b' (accepted: text, segments, label, id, group)")]
    assert ("columns", "format 'tsv' needs column 'segments'") in \
        reader_problems(_quiz(columns={"text": "question", "label": "answer"}))
    assert reader_problems(_quiz(columns={"text": ["question", "a"], "segments": ["b"], "label": "answer"}))[0][0] \
        == "columns.text"


def test_hf_reads_the_declared_fields_too(plugin_kind: Any, tmp_path: Path) -> None:
    import datasets

    datasets.Dataset.from_dict({"q": ["Which thins the blood?"], "opts": [["warfarin", "insulin"]], "y": [1]}) \
        .to_parquet(str(tmp_path / "t.parquet"))
    task = _quiz(format="hf", columns={"text": "q", "segments": "opts", "label": "y"}, reader_options={})
    assert reader_problems(task) == []
    [example] = READERS.get("hf")(tmp_path / "t.parquet", task)
    assert example.inputs == {"text": "Which thins the blood?", "segments": ["warfarin", "insulin"]}
    assert reader_problems(_quiz(format="hf", columns={"text": "q", "label": "y"}, reader_options={})) == \
        [("columns", "format 'hf' needs column 'segments' (a field of the dataset), or reader_options.schema")]


def test_the_fingerprints_follow_the_declared_fields(plugin_kind: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first = Example("q1", 0, inputs={"text": "Which?", "segments": ["a", "b"]})
    changed = Example("q1", 0, inputs={"text": "Which?", "segments": ["a", "c"]})
    assert examples_fingerprint([first]) != examples_fingerprint([changed])
    # a shipped example hashes as before kinds declared their inputs, so its cached features stay valid
    pair = Example("p1", "yes", text="a", text_b="b", group="g")
    old = hashlib.sha256(json.dumps(["p1", "yes", "a", "b", None, "g"]).encode()).hexdigest()[:16]
    assert examples_fingerprint([pair]) == old

    tokenizer = type("Tokenizer", (), {"name_or_path": "t", "__len__": lambda self: 5, "model_max_length": 512})()
    task = _quiz(max_length=24)
    before = cache_key(task, tokenizer, None, "source", 1)
    widened = type("Widened", (Segments,), {"input_fields": (*Segments.input_fields, InputField("context"))})()
    monkeypatch.setattr(type(task.kind), "inputs", widened)
    assert cache_key(task, tokenizer, None, "source", 1) != before


def test_multi_task_predict_gives_each_multiple_choice_task_its_answer(quiz_project: Path, tiny_encoder: str) -> None:
    definition = (quiz_project / "defs" / "quiz.yml").read_text()
    (quiz_project / "defs" / "quiz2.yml").write_text(definition.replace("name: quiz", "name: quiz2"))
    trained = _mtbio(["refine", "--tasks", "quiz,quiz2", "--task-defs", "defs", "--data-dir", "data", "--encoder",
                      tiny_encoder, "--max-steps", "2", "--batch-size", "4", "--output", "run"], quiz_project)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (quiz_project / "in.txt").write_text("Which drug opens the airways?\tmetformin\theparin\tsalbutamol\n")
    predicted = _mtbio(["predict", "run", "--tasks", "quiz,quiz2", "--input", "in.txt", "--output", "out.jsonl"],
                       quiz_project)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    [record] = [json.loads(line) for line in (quiz_project / "out.jsonl").open()]
    candidates = ["metformin", "heparin", "salbutamol"]
    assert set(record["answer"]) == {"quiz", "quiz2"}
    assert all(record["answer"][t] == candidates[record["prediction"][t]] for t in ("quiz", "quiz2"))
