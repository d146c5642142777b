"""Faults and bad input, round two (issue 69): a resume over a changed task definition, exports that are atomic,
portable and reproduce `mtbio predict` in a process without mtbio, cards built from the run's own record, verdicts
never printed under 3 seeds, warnings that say "below" when a score is below, --max-length checked, an empty
parquet split named. Rows F1-F11 of the issue; F12 is the polling loop in test_sweep_launchers.py. All runs use
the packaged demo data and a tiny random BERT."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from demo_cli import DATA, SAMPLE_DEFS, cli as _cli, ok as _ok, one_error_line as _one_error_line

from mtbio.experiments.demo import SAMPLE_DIR

TEXTS = ["Aspirin reduced the risk of infarction .", "The patient denies chest pain ."]
PAIRS = [["The patient denies chest pain.", "The patient has chest pain."],
         ["Aspirin was given.", "The drug was administered."]]


# A process in which `import mtbio` fails: what an exported model's user has.
WITHOUT_MTBIO = """
import json, sys
sys.modules["mtbio"] = None  # any import of mtbio now raises ImportError
import torch
from transformers import AutoTokenizer
kind, path, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if kind == "peft":
    from peft import AutoPeftModelForTokenClassification, PeftModel
    from transformers import AutoModelForTokenClassification
    model = PeftModel.from_pretrained(AutoModelForTokenClassification.from_pretrained(path + "/base"), path)
    auto = AutoPeftModelForTokenClassification.from_pretrained(".")  # the test runs this inside the export
    tokenizer = AutoTokenizer.from_pretrained(path)
    out = []
    for text in inputs:
        enc = tokenizer(text.split(), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            a, b = model.eval()(**enc).logits[0], auto.eval()(**enc).logits[0]
        assert torch.allclose(a, b, atol=1e-5)
        first = [i for i, w in enumerate(enc.word_ids()) if w is not None and (i == 0 or enc.word_ids()[i - 1] != w)]
        out.append([model.config.id2label[int(a[i].argmax())] for i in first])
else:
    from transformers import AutoModelForSequenceClassification
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    out = []
    for item in inputs:
        enc = tokenizer(*item, return_tensors="pt") if isinstance(item, list) else tokenizer(item, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0]
        out.append(float(logits[0]) if kind == "regression" else model.config.id2label[int(logits.argmax())])
assert not any(name == "mtbio" or name.startswith("mtbio.") for name, m in sys.modules.items() if m is not None)
print(json.dumps(out))
"""


def _without_mtbio(kind: str, path: Path, inputs: list[object], cwd: Path) -> list[object]:
    done = subprocess.run([sys.executable, "-c", WITHOUT_MTBIO, kind, str(path), json.dumps(inputs)], cwd=cwd,
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    """A regression fine-tune, a LoRA tagging fine-tune, two classification fine-tunes merged, and a refine run
    with a fine-tune from it."""
    root = tmp_path_factory.mktemp("round2")
    steps = ["--max-steps", "4", "--encoder", tiny_encoder]
    _ok("finetune", "--task", "demo-sts", *DATA, *steps, "--output", root / "sts")
    _ok("finetune", "--task", "demo-ner", *DATA, *steps, "--adapter", "lora", "--output", root / "lora")
    _ok("finetune", "--task", "demo-relation", *DATA, *steps, "--output", root / "rel")
    _ok("finetune", "--task", "demo-nli", *DATA, *steps, "--output", root / "nli")
    _ok("merge", root / "rel" / "demo-relation", root / "nli" / "demo-nli", "--method", "average",
        "--output", root / "merged")
    _ok("refine", "--tasks", "demo-ner,demo-relation", *DATA, *steps, "--output", root / "refined")
    _ok("finetune", "--task", "demo-relation", "--from", root / "refined", *DATA, "--max-steps", "2",
        "--output", root / "tuned")
    return root


# ---- F1: a regression task exports, and the export reproduces mtbio predict without mtbio ------------------------

def test_f1_a_regression_export_reproduces_predict_without_mtbio(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "sts"
    _ok("export", runs / "sts" / "demo-sts", "--task", "demo-sts", "--output", out)
    config = json.loads((out / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    theirs = _without_mtbio("regression", out, PAIRS, tmp_path)
    ours = __import__("mtbio").load(runs / "sts" / "demo-sts").predict("demo-sts", [tuple(p) for p in PAIRS])
    assert theirs == pytest.approx(ours, abs=1e-4)


# ---- F2: an export that fails leaves nothing, and its rerun is not refused ---------------------------------------

def test_f2_a_failed_export_leaves_no_files_and_the_rerun_succeeds(runs: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import mtbio.experiments.export as export

    out = tmp_path / "chem"

    def differs(*args: object, **kwargs: object) -> None:
        raise export.MtbioError("task 'demo-relation': the exported model's logits differ from the run's")

    monkeypatch.setattr(export, "_check_same_logits", differs)
    line = _one_error_line(_cli("export", runs / "rel" / "demo-relation", "--task", "demo-relation", "--output", out))
    assert "logits differ" in line
    assert not out.exists() and not list(tmp_path.iterdir())  # neither the output nor its staging directory
    monkeypatch.undo()
    _ok("export", runs / "rel" / "demo-relation", "--task", "demo-relation", "--output", out)
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    # a failed re-export over a good one leaves the good one exactly as it was
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(export, "_check_same_logits", differs)
    _one_error_line(_cli("export", runs / "nli" / "demo-nli", "--task", "demo-nli", "--output", out))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# ---- F3: a resume refuses a changed task definition ---------------------------------------------------------------

@pytest.mark.parametrize("edit, field", [
    (lambda text: text.replace("labels: [DDI-false, DDI-effect, DDI-mechanism, DDI-advise]",
                               "labels: [DDI-effect, DDI-false, DDI-mechanism, DDI-advise]"), "labels"),
    (lambda text: re.sub(r"(?m)^max_length: .*$", "max_length: 40", text), "max_length"),
])
def test_f3_resume_refuses_a_changed_task_definition(edit: object, field: str, tmp_path: Path,
                                                     tiny_encoder: str) -> None:
    defs = tmp_path / "defs"
    shutil.copytree(SAMPLE_DEFS, defs)
    args = ["finetune", "--task", "demo-relation", *DATA[2:], "--task-defs", defs, "--encoder", tiny_encoder,
            "--max-steps", "4", "--save-every", "2", "--output", tmp_path / "run"]
    _ok(*args)
    run = tmp_path / "run" / "demo-relation"
    (run / "results.json").unlink()  # as if killed after its step-4 checkpoint
    path = defs / "demo-relation.yml"
    original = path.read_text()
    path.write_text(edit(original))  # type: ignore[operator]
    line = _one_error_line(_cli(*args, "--resume"))
    assert "task 'demo-relation' has changed" in line and f"({field}:" in line and "tasks/demo-relation.yml" in line
    path.write_text(original)
    _ok(*args, "--resume")


# ---- F4, F5: the card says what the model is -----------------------------------------------------------------------

def test_f4_a_merged_export_card_names_the_method_and_runs_and_the_model_loads_without_mtbio(
        runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "merged"
    _ok("export", runs / "merged", "--task", "demo-relation", "--output", out)
    card = (out / "README.md").read_text()
    assert "`mtbio merge` with method `average`" in card and "from 2 runs" in card
    assert str(runs / "rel" / "demo-relation") in card and str(runs / "nli" / "demo-nli") in card
    assert "4 optimizer steps" in card and "a fixed subset of 32 training examples" in card
    assert "recipe" not in card and "jointly with" not in card and " ? " not in card
    assert "**Not scored:**" in card  # merged without --score dev: nothing says it does the task
    theirs = _without_mtbio("classification", out, TEXTS, tmp_path)
    assert theirs == __import__("mtbio").load(runs / "merged").predict("demo-relation", TEXTS)


def test_f5_a_card_of_a_fine_tune_from_a_refine_names_the_refinement(runs: Path, tmp_path: Path,
                                                                       tiny_encoder: str) -> None:
    out = tmp_path / "tuned"
    _ok("export", runs / "tuned" / "demo-relation", "--task", "demo-relation", "--output", out)
    card = (out / "README.md").read_text()
    assert (f"- **Base model:** {tiny_encoder}, refined by mtbio on demo-ner, demo-relation, then fine-tuned on "
            "demo-relation") in card
    assert "- **Task:** demo-relation (classification), metric `micro_f1`; labels: DDI-false, DDI-effect" in card


# ---- F6: no verdict under 3 seeds, on every surface ----------------------------------------------------------------

def test_f6_no_surface_prints_a_verdict_under_three_seeds() -> None:
    from mtbio.reporting.selection import verify_pairs
    from mtbio.reporting.verdicts import Rule, correct, compare, verdict_text

    alone = {1: 0.50}
    summary, kept = verify_pairs(alone, {"other": {1: 0.40}}, "accuracy")
    cell = summary["pairs"]["other"]
    assert kept == [] and verdict_text(cell).startswith("no verdict (1 seed: a verdict needs at least 3")
    uncorrected = compare({1: 0.4, 2: 0.4}, {1: 0.5, 2: 0.5})  # 2 seeds, never corrected
    assert verdict_text(uncorrected).startswith("no verdict (2 seeds")
    cells = {"a": compare({1: 0.6, 2: 0.61, 3: 0.62}, {1: 0.5, 2: 0.5, 3: 0.5})}
    correct(cells, Rule())
    assert verdict_text(cells["a"]) == "improves"


def test_f6_select_md_at_one_seed_prints_no_verdict() -> None:
    from mtbio.reporting.selection import build_selection, selection_markdown, verify_pairs

    pairs, selected = verify_pairs({1: 0.50}, {"other": {1: 0.40}}, "accuracy")
    outcome = build_selection("t", "accuracy", {"alone": {1: 0.50}, "selected": {1: 0.40}, "all": {1: 0.45}})
    result = {"target": "t", "outcome": outcome, "predictor": "cosine", "candidates": ["other"],
              "ranking": [{"task": "other", "score": 0.1}], "verify": True, "top": 1, "correction": "holm",
              "prediction_cost": {"wall_seconds": 1.0, "train_equivalent_examples": 10.0}, "seeds": [1],
              "selected": selected, **pairs}
    text = selection_markdown(result)
    assert "no effect" not in text.split("Rule:")[0], text
    assert text.count("no verdict (1 seed: a verdict needs at least 3)") == 4, text


# ---- F7: a score below its trivial score is called below -----------------------------------------------------------

def test_f7_the_warning_and_the_card_say_below_when_a_score_is_below_its_trivial_score(runs: Path, tmp_path: Path,
                                                                                       caplog: pytest.LogCaptureFixture) -> None:
    from mtbio.model.floor import floor_relation

    from mtbio.evaluation.trivial import trivial_relation

    assert trivial_relation(0.47, 0.53, "accuracy") == "below its trivial score by 6.0 points"
    assert trivial_relation(0.535, 0.53, "accuracy") == "within a point of its trivial score"
    assert trivial_relation(0.60, 0.53, "mse") == "below its trivial score by 0.07"  # lower is better for mse
    trivial_floor = {"score": 0.53, "source": "trivial"}
    assert floor_relation(0.47, trivial_floor, "accuracy") == "below"
    assert floor_relation(0.535, trivial_floor, "accuracy") == "within a point of"
    assert floor_relation(0.60, trivial_floor, "mse") == "below"  # lower is better for mse
    run = runs / "rel" / "demo-relation"
    results = json.loads((run / "results.json").read_text())
    score, trivial = results["dev"]["demo-relation"]["micro_f1"], results["trivial"]["demo-relation"]
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    # a results file written before `floor` and `below_floor`: its `not_learned` is still read
    results.pop("floor"), results.pop("below_floor")
    results["dev"]["demo-relation"]["micro_f1"], results["not_learned"] = trivial - 0.06, ["demo-relation"]
    (copy / "results.json").write_text(json.dumps(results))
    _ok("export", copy, "--task", "demo-relation", "--output", tmp_path / "out")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "**Below its floor:** this run's dev score is below its trivial score" in card
    assert score is not None


# ---- F8: a LoRA export is portable ---------------------------------------------------------------------------------

def test_f8_a_moved_lora_export_loads_with_peft_and_autopeft_and_reproduces_predict(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "lora"
    _ok("export", runs / "lora" / "demo-ner", "--task", "demo-ner", "--output", out)
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "base" and adapter["task_type"] == "TOKEN_CLS"
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, moved)
    shutil.rmtree(out)  # nothing of the original place is left to lean on
    theirs = _without_mtbio("peft", moved, TEXTS, moved)
    ours = __import__("mtbio").load(runs / "lora" / "demo-ner").predict("demo-ner", [t.split() for t in TEXTS])
    assert theirs == ours


# ---- F9: an edited exported file is the user's -------------------------------------------------------------------

def test_f9_a_re_export_refuses_to_replace_an_edited_card(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    source = runs / "rel" / "demo-relation"
    _ok("export", source, "--task", "demo-relation", "--output", out)
    _ok("export", source, "--task", "demo-relation", "--output", out)  # its own files: replaced without a flag
    (out / "README.md").write_text("my notes on this model\n")
    line = _one_error_line(_cli("export", source, "--task", "demo-relation", "--output", out))
    assert "README.md (edited since mtbio wrote it)" in line and "--overwrite" in line
    assert (out / "README.md").read_text() == "my notes on this model\n"
    (out / "notes.txt").write_text("mine\n")
    _ok("export", source, "--task", "demo-relation", "--output", out, "--overwrite")
    assert (out / "README.md").read_text() != "my notes on this model\n"
    assert (out / "notes.txt").read_text() == "mine\n"  # a user's file the export does not replace stays


# ---- F10: --max-length above the encoder's positions ---------------------------------------------------------------

def test_f10_max_length_above_the_encoders_positions_is_refused(tmp_path: Path, tiny_encoder: str) -> None:
    args = ["finetune", "--task", "demo-relation", "--task-defs", SAMPLE_DEFS, "--data-dir", SAMPLE_DIR,
            "--encoder", tiny_encoder, "--max-steps", "1", "--output", tmp_path / "run"]
    line = _one_error_line(_cli(*args, "--max-length", "100000"))
    assert "--max-length 100000" in line and "at most 128 tokens" in line
    assert not (tmp_path / "run" / "demo-relation" / "config.yaml").exists()


def test_f10_the_truncation_log_names_the_length_texts_were_cut_at(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    from transformers import AutoTokenizer

    from mtbio.data.pipeline import featurize_raw
    from mtbio.data.loading import read_split
    from mtbio.model.encoder import default_encoder_path
    from mtbio.tasks.loading import load_task_def

    task = load_task_def(SAMPLE_DIR / "task_defs" / "demo-relation.yml")
    tokenizer = AutoTokenizer.from_pretrained(default_encoder_path())
    tokenizer.model_max_length = 12  # the encoder's limit, below the asked length
    examples = read_split(task, "train", SAMPLE_DIR)[:4]
    with caplog.at_level("INFO", logger="mtbio"):
        featurize_raw(task, examples, tokenizer, max_length=100000)
    assert "(max_length 12)" in caplog.text and "100000" not in caplog.text


# ---- F11: an empty parquet split ----------------------------------------------------------------------------------

def test_f11_an_empty_parquet_split_is_named(tmp_path: Path, tiny_encoder: str) -> None:
    import datasets

    features = datasets.Features({"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["a", "b"])})
    (tmp_path / "data" / "mine").mkdir(parents=True)
    datasets.Dataset.from_dict({"sentence": ["one two", "three four"] * 8, "label": [0, 1] * 8},
                               features=features).to_parquet(str(tmp_path / "data" / "mine" / "train.parquet"))
    datasets.Dataset.from_dict({"sentence": [], "label": []},
                               features=features).to_parquet(str(tmp_path / "data" / "mine" / "dev.parquet"))
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "mine.yml").write_text(
        "name: mine\ntype: classification\nlabels: [a, b]\nformat: hf\n"
        "files: {train: mine/train.parquet, dev: mine/dev.parquet}\ncolumns: {text: sentence, label: label}\n")
    line = _one_error_line(_cli("finetune", "--task", "mine", "--task-defs", tmp_path / "defs", "--data-dir",
                                tmp_path / "data", "--encoder", tiny_encoder, "--max-steps", "1",
                                "--output", tmp_path / "run"))
    assert "split dev of" in line and "dev.parquet is empty" in line
