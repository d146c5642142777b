"""Faults and bad input, round three (issue 91), rows G1, G3, G4, G10, G11, G14, G15, G16, G17: a resume over an
edited data file, labels lost to truncation, BIO order, option values checked up front, options that do not apply
to a task, a label missing from the training split. Runs use the packaged demo data and a tiny random BERT."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from demo_cli import DATA, SAMPLE_DEFS, cli as _cli, ok as _ok, one_error_line as _one_error_line

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR


# ---- G1: a resume refuses a data file edited since the run read it -------------------------------------------------

def test_g1_resume_refuses_an_edited_training_file(tmp_path: Path, tiny_encoder: str) -> None:
    data = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR / "relation", data / "relation")
    args = ["finetune", "--task", "demo-relation", *DATA, "--data-dir", data, "--encoder", tiny_encoder,
            "--max-steps", "4", "--save-every", "2", "--output", tmp_path / "run"]
    _ok(*args)
    run = tmp_path / "run" / "demo-relation"
    (run / "results.json").unlink()  # as if killed after its step-4 checkpoint
    train = data / "relation" / "train.tsv"
    original = train.read_text()
    lines = original.splitlines(keepends=True)
    label = lines[0].rstrip("\n").rsplit("\t", 1)[1]
    other = "DDI-effect" if label != "DDI-effect" else "DDI-advise"
    train.write_text("".join([lines[0].replace(f"\t{label}\n", f"\t{other}\n"), *lines[1:]]))  # one label edited
    line = _one_error_line(_cli(*args, "--resume"))
    assert f"task 'demo-relation' train data: {train.resolve()} has changed" in line
    assert "restore the file, or start a new run with another --output" in line
    assert str(train.resolve()) in (run / "data.json").read_text()  # the record the resume compared with
    train.write_text(original)  # the same contents again (a new modification time): resumes as before
    _ok(*args, "--resume")
    assert (run / "results.json").is_file()


# ---- G10: an optimizer's option values are checked before anything is read or built ---------------------------------

def test_g10_an_out_of_range_beta_is_one_line_before_any_data_is_read(tmp_path: Path) -> None:
    line = _one_error_line(_cli("finetune", "--task", "demo-relation", *DATA, "--optimizer",
                                "{name: adamw, betas: [1.5, 0.9]}", "--output", tmp_path / "run"))
    assert "'optimizer'" in line and "betas.0" in line and "less than 1" in line
    assert not (tmp_path / "run").exists()


# ---- G15: an option that applies to none of a run's tasks is warned about and not recorded as applied ---------------

@pytest.mark.parametrize("task, flag, value, key, recorded", [
    ("demo-ner", "--pair-form", "bi", "pair_form", "task"),  # tagging: not a pair
    ("demo-hoc", "--pair-form", "bi", "pair_form", "task"),  # one text
    ("demo-ner", "--pooling", "mean", "pooling", "task"),  # a tagging head reads every token
    ("demo-relation", "--select", "per-task", "select_by", "mean"),  # one task
])
def test_g15_an_option_that_does_not_apply_is_warned_and_not_recorded(task: str, flag: str, value: str, key: str,
                                                                      recorded: str, tmp_path: Path,
                                                                      tiny_encoder: str) -> None:
    import yaml

    args = ["finetune", "--task", task, *DATA, "--encoder", tiny_encoder, "--max-steps", "1", "--no-baselines",
            "--output", tmp_path / "run", flag, value]
    result = _ok(*args)
    assert f"{flag} {value} does nothing here" in result.output and f"this run trains {task}" in result.output
    config = yaml.safe_load((tmp_path / "run" / task / "config.yaml").read_text())
    assert config[key] == recorded
    (tmp_path / "run" / task / "results.json").unlink()  # as if killed: the same command resumes
    _ok(*args, "--resume")


def test_g15_a_recipes_own_value_is_not_warned_about(tmp_path: Path, tiny_encoder: str) -> None:
    import yaml

    result = _ok("finetune", "--task", "demo-ner", *DATA, "--encoder", tiny_encoder, "--recipe", "minilm",
                 "--max-steps", "1", "--no-baselines", "--output", tmp_path / "run")
    assert "does nothing here" not in result.output
    assert yaml.safe_load((tmp_path / "run" / "demo-ner" / "config.yaml").read_text())["pair_form"] == "auto"


# ---- G16: ModernBERT with --pooling pooler: the flag is named, not the task definition -------------------------------

def test_g16_pooling_pooler_on_an_encoder_without_a_pooler_blames_the_flag(tmp_path: Path, tiny_modernbert: str) -> None:
    line = _one_error_line(_cli("finetune", "--task", "demo-relation", *DATA, "--encoder", tiny_modernbert,
                                "--max-steps", "1", "--pooling", "pooler", "--output", tmp_path / "run"))
    assert "--pooling pooler: this encoder (ModernBertModel) has no pooler; pass --pooling cls or mean" in line
    assert "sets pooling" not in line


# ---- G4: an I- tag that continues no entity is reported with its file and line -------------------------------------

def test_g4_tasks_check_reports_an_i_tag_after_o_with_its_file_and_line(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE_DIR / "ner", tmp_path / "ner")
    train = tmp_path / "ner" / "train.tsv"
    lines = train.read_text().splitlines(keepends=True)
    assert lines[3:5] == ["were\tO\n", "compared\tO\n"] and lines[9:11] == ["psychosis\tB-Disease\n", ".\tO\n"]
    lines[4] = "compared\tI-Chemical\n"  # after O
    lines[10] = ".\tI-Chemical\n"  # after another type's B-
    train.write_text("".join(lines))
    result = CliRunner().invoke(main, ["tasks", "check", str(SAMPLE_DIR / "task_defs" / "demo-ner.yml"),
                                       "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: task 'demo-ner' train: I-Chemical after O, read as the start of an entity: 1 time, first in {train}:1",
        f"warning: task 'demo-ner' train: I-Chemical after B-Disease, read as the start of an entity: 1 time, first in "
        f"{train}:1"]
    assert result.output.splitlines()[-1].startswith("ok: demo-ner")
    clean = CliRunner().invoke(main, ["tasks", "check", str(SAMPLE_DIR / "task_defs" / "demo-ner.yml"),
                                      "--data-dir", str(SAMPLE_DIR)])
    assert clean.exit_code == 0 and "warning" not in clean.output


# ---- G17: a label that never occurs in the training split ----------------------------------------------------------

def test_g17_a_label_absent_from_the_training_split_is_warned_about(tmp_path: Path, tiny_encoder: str) -> None:
    shutil.copytree(SAMPLE_DIR / "relation", tmp_path / "relation")
    train = tmp_path / "relation" / "train.tsv"
    kept = [line for line in train.read_text().splitlines(keepends=True) if not line.endswith("\tDDI-advise\n")]
    train.write_text("".join(kept))
    result = _ok("finetune", "--task", "demo-relation", *DATA, "--data-dir", tmp_path, "--max-train-examples", "1000",
                 "--encoder", tiny_encoder, "--max-steps", "1", "--no-baselines", "--output", tmp_path / "run")
    assert (f"task 'demo-relation' train: label 'DDI-advise' occurs in none of its {len(kept)} training examples; "
            "the head cannot learn to predict it") in result.output
    check = CliRunner().invoke(main, ["tasks", "check", str(SAMPLE_DIR / "task_defs" / "demo-relation.yml"),
                                      "--data-dir", str(tmp_path)])
    assert check.exit_code == 0 and "label 'DDI-advise' occurs in none" in check.output


# ---- G3 (+ G11's count): labels removed by truncation are counted per task and warned about as lost ----------------

SPAN_QA = Path(__file__).parent / "fixtures" / "span_qa"


def test_g3_answers_cut_off_by_truncation_are_warned_as_lost_labels(tmp_path: Path, tiny_encoder: str) -> None:
    import json

    result = _ok("finetune", "--task", "clinical-qa", "--task-defs", SPAN_QA, "--data-dir", SPAN_QA,
                 "--encoder", tiny_encoder, "--max-length", "16", "--max-steps", "1", "--batch-size", "8",
                 "--no-baselines", "--output", tmp_path / "run")
    results = json.loads((tmp_path / "run" / "clinical-qa" / "results.json").read_text())
    lost = results["labels_lost"]["clinical-qa"]
    assert 0 < lost["train"] <= results["truncated"]["clinical-qa"]["train"] <= 150
    assert (f"task 'clinical-qa' train: cut at max_length 16: {results['truncated']['clinical-qa']['train']} of 150 "
            f"examples truncated; {lost['train']} answers fell past the cut and became 'no answer' targets; raise "
            "--max-length, up to the encoder's limit") in result.output
    kept = _ok("finetune", "--task", "clinical-qa", "--task-defs", SPAN_QA, "--data-dir", SPAN_QA,
               "--encoder", tiny_encoder, "--max-steps", "1", "--batch-size", "8", "--no-baselines",
               "--output", tmp_path / "whole")  # the definition's 96 tokens hold every answer
    assert "fell past the cut" not in kept.output
    assert "labels_lost" in results and json.loads(
        (tmp_path / "whole" / "clinical-qa" / "results.json").read_text())["labels_lost"] == {}


def test_g3_entities_cut_off_by_truncation_are_warned_as_lost_labels(tmp_path: Path, tiny_encoder: str) -> None:
    result = _ok("finetune", "--task", "demo-ner", *DATA, "--max-length", "8", "--encoder", tiny_encoder,
                 "--max-steps", "1", "--no-baselines", "--output", tmp_path / "run")
    [line] = [x for x in result.output.splitlines() if "entities lost words to the cut" in x and "'demo-ner' train:" in x]
    assert "raise --max-length or read long texts in windows (sliding_window)" in line


# ---- G11, G14: a --max-length a task's windows cannot take is one line, before anything is built -------------------

@pytest.mark.parametrize("length", ["48", "8"])
def test_g11_g14_a_max_length_below_twice_the_stride_is_refused(length: str, tmp_path: Path,
                                                               tiny_encoder: str) -> None:
    definition = (SAMPLE_DIR / "task_defs" / "demo-ner.yml").read_text().replace("name: demo-ner", "name: ner-windows")
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "ner-windows.yml").write_text(definition + "sliding_window: {stride: 24}\n")
    args = ["finetune", "--task", "ner-windows", "--task-defs", tmp_path / "defs", "--data-dir", SAMPLE_DIR,
            "--encoder", tiny_encoder, "--max-steps", "1", "--no-baselines", "--output", tmp_path / "run"]
    line = _one_error_line(_cli(*args, "--max-length", length))
    assert line == (f"error: --max-length {length}: task 'ner-windows' reads windows that repeat sliding_window.stride "
                    "24 tokens, half a window or more at that length; give a max_length of at least 50, or a smaller "
                    "stride")
    assert not (tmp_path / "run" / "ner-windows" / "config.yaml").exists()
    _ok(*args, "--max-length", "50")
