"""Faults and bad input, round three (issue 91): cards and predictions that say which weights they are, merge's
ties and its staging, the docs' export examples, and what a contributor's components need (an optimizer's own
lookahead, a kind's own prediction keys, a span-extraction task to run)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.training.affinity import step_from
from mtbio.training.optim import build_optimizer

SAMPLES = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"


# ---- contributor finding 1: the registered optimizer owns its lookahead ----------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (4,)])
def test_adafactors_lookahead_is_the_gradients_part_of_its_update(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(*shape))
    optimizer = build_optimizer([{"params": [param], "weight_decay": 0.0}], "adafactor", 1e-2)
    for _ in range(3):
        param.grad = torch.randn(*shape)
        optimizer.step()
    grad = torch.randn(*shape)
    state = copy.deepcopy(optimizer.state[param])
    predicted = step_from(optimizer, optimizer.param_groups[0], grad, optimizer.state[param])
    assert all(not torch.is_tensor(v) or torch.equal(v, optimizer.state[param][k]) for k, v in state.items())
    before = param.detach().clone()
    param.grad = grad
    optimizer.step()
    assert torch.allclose(before - param.detach(), predicted, atol=1e-7, rtol=1e-5)


def test_affinity_runs_with_adafactor(tmp_path: Path, tiny_encoder: str) -> None:
    result = CliRunner().invoke(main, [
        "affinity", "--tasks", "demo-hoc,demo-sts", "--task-defs", str(SAMPLES / "task_defs"), "--data-dir",
        str(SAMPLES), "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "4", "--max-train-examples", "8",
        "--max-length", "32", "--seeds", "1", "--affinity-every", "1", "--affinity-batch-size", "4",
        "--optimizer", "adafactor", "--output", str(tmp_path / "aff")])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "aff" / "affinity.json").read_text())
    edges = saved["predictors"]["lookahead"]["edges"]
    assert len(edges) == 2 and all(e["score"] == e["score"] for e in edges)  # measured, not NaN


# ---- G5, G9, G12: merge -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    """A tiny fine-tuned demo-hoc run."""
    out = tmp_path_factory.mktemp("tuned")
    result = CliRunner().invoke(main, [
        "finetune", "--task", "demo-hoc", "--task-defs", str(SAMPLES / "task_defs"), "--data-dir", str(SAMPLES),
        "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "4", "--max-train-examples", "8",
        "--max-length", "32", "--lr", "1e-2", "--no-baselines", "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out / "demo-hoc"


@pytest.mark.parametrize("method", ["ties", "dare_linear"])
def test_a_run_merged_with_itself_is_the_run(tmp_path: Path, tuned_run: Path, tiny_encoder: str, method: str) -> None:
    from safetensors.torch import load_file

    result = CliRunner().invoke(main, ["merge", str(tuned_run), str(tuned_run), "--method", method, "--output",
                                       str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    merged = load_file(str(tmp_path / "m" / "encoder" / "model.safetensors"))
    own = load_file(str(tuned_run / "encoder" / "model.safetensors"))
    base = load_file(str(Path(tiny_encoder) / "model.safetensors"))
    moved = [k for k in own if not torch.equal(own[k], base[k])]
    assert moved  # the run did train: there is a task vector to keep
    for key in own:
        torch.testing.assert_close(merged[key], own[key], rtol=0, atol=1e-6, msg=key)


def test_a_merge_killed_mid_write_leaves_nothing_that_blocks_the_same_command(tmp_path: Path,
                                                                              tuned_run: Path) -> None:
    import os
    import subprocess
    import sys

    args = ["merge", str(tuned_run), str(tuned_run), "--method", "average", "--output", str(tmp_path / "m")]
    killed = ("import os, sys, mtbio.model.persist as p\n"
              "p.save_tensors = lambda *a, **k: os._exit(137)  # killed while the heads are written\n"
              "from mtbio.cli import main\nmain(sys.argv[1:])\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", killed, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 137, done.stderr
    assert not (tmp_path / "m").exists()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m" / "results.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_a_merge_onto_a_full_disk_says_nothing_was_written(tmp_path: Path, tuned_run: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    import mtbio.model.persist as persist

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(persist, "save_tensors", full)
    result = CliRunner().invoke(main, ["merge", str(tuned_run), str(tuned_run), "--method", "average", "--output",
                                       str(tmp_path / "m")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: cannot write {tmp_path / 'm'}: the disk is full; the merged run was not "
                                     "written and nothing partial is left")
    assert list(tmp_path.iterdir()) == []


# ---- G2, G7: a --select per-task run's cards and predictions say which weights --------------------------------
# scripted dev scores by evaluation step: demo-nli peaks at step 2, demo-ner at step 4; their mean at step 4
SCRIPT = {"demo-nli": [0.1, 0.6, 0.3, 0.2], "demo-ner": [0.1, 0.2, 0.3, 0.9]}
QUICK = ["--task-defs", str(SAMPLES / "task_defs"), "--data-dir", str(SAMPLES), "--batch-size", "8",
         "--max-length", "48", "--no-baselines"]
PAIRS = "A man sleeps.\tA man is awake.\nThe patient is febrile.\tThe patient has a fever.\n"


@pytest.fixture(scope="module")
def per_task_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    """A joint run of demo-nli and demo-ner with --select per-task whose dev scores are scripted."""
    from mtbio.training.trainer import Trainer

    def scripted(self: Trainer, split: str, tasks: object = None) -> dict[str, dict[str, float]]:
        step = self.state.global_step
        return {name: {data.task.metric: SCRIPT[name][step - 1]} for name, data in self.data.items()
                if tasks is None or name in tasks}

    out = tmp_path_factory.mktemp("per-task") / "joint"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Trainer, "_score", scripted)
        result = CliRunner().invoke(main, ["refine", "--tasks", "demo-nli,demo-ner", "--max-steps", "4",
                                           "--eval-every", "1", "--lr", "1e-2", "--select", "per-task", "--encoder",
                                           tiny_encoder, *QUICK, "--output", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "results.json").read_text())
    assert saved["best_step"] == 4 and saved["per_task_best"]["demo-nli"]["step"] == 2
    return out


def test_a_per_task_cards_says_the_step_and_selection_its_weights_came_from(tmp_path: Path,
                                                                           per_task_run: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(per_task_run), "--task", "demo-nli", "--output",
                                       str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    card = (tmp_path / "e" / "README.md").read_text()
    assert ("jointly with demo-ner (one shared encoder); 4 optimizer steps; these weights are demo-nli's own best dev "
            "evaluation, at step 2 (`--select per-task`: `best/demo-nli/`)") in card
    assert "best dev at step 4" not in card and "| dev | accuracy | 0.6000 |" in card


def test_a_finetune_from_a_per_task_run_names_every_task_it_was_refined_on(tmp_path: Path, per_task_run: Path,
                                                                           ) -> None:
    result = CliRunner().invoke(main, ["finetune", "--from", str(per_task_run), "--task", "demo-nli", "--max-steps",
                                       "1", *QUICK, "--output", str(tmp_path / "ft")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["export", str(tmp_path / "ft" / "demo-nli"), "--task", "demo-nli", "--output",
                                       str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    card = (tmp_path / "e" / "README.md").read_text()
    assert "refined by mtbio on demo-nli, demo-ner, then fine-tuned on demo-nli" in card


def test_a_per_task_runs_predictions_are_the_tasks_own_in_one_or_several(tmp_path: Path, per_task_run: Path) -> None:
    (tmp_path / "in.txt").write_text(PAIRS)
    outputs, logged = {}, {}
    for flag, tasks in (("--task", "demo-nli"), ("--tasks", "demo-nli,demo-ner")):
        out = tmp_path / f"{flag.strip('-')}.jsonl"
        result = CliRunner().invoke(main, ["predict", str(per_task_run), flag, tasks, "--input",
                                           str(tmp_path / "in.txt"), "--scores", "--output", str(out)])
        assert result.exit_code == 0, result.output
        outputs[flag], logged[flag] = [json.loads(line) for line in out.read_text().splitlines()], result.output
    one = [(r["prediction"], r["scores"]) for r in outputs["--task"]]
    several = [(r["prediction"]["demo-nli"], r["scores"]["demo-nli"]) for r in outputs["--tasks"]]
    assert several == one
    own = per_task_run / "best" / "demo-nli"
    line = f"demo-nli: predicted with the weights in {own} (the task's own best dev evaluation, step 2, --select per-task)"
    assert line in logged["--task"] and line in logged["--tasks"]


# ---- contributor findings 2 and 3: a shipped span-extraction task, its answers in a multi-task predict ---------
def _page_commands(page: str, mentioning: str) -> list[list[str]]:
    """The `mtbio` lines of a docs page's bash blocks that mention `mentioning`, as test_readme.py reads them."""
    import shlex

    from test_readme import REPO, readme_commands

    lines = [line.replace(" mtbio/sample_data", f" {REPO / 'mtbio' / 'sample_data'}")
             for line in readme_commands([page]) if mentioning in line and line.startswith("mtbio ")]
    return [shlex.split(line)[1:] for line in lines]


def test_the_shipped_span_extraction_task_runs_as_documented(tmp_path: Path, tiny_encoder: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    commands = _page_commands("docs/task_definitions.md", "demo-qa")
    assert [words[0] for words in commands] == ["finetune", "predict"]
    context = "He received warfarin 5 mg twice a day for atrial fibrillation."
    (tmp_path / "questions.txt").write_text(f"Which drug was started?\t{context}\n")
    for words in commands:
        extra = ["--max-steps", "2", "--batch-size", "8", "--encoder", tiny_encoder] if words[0] == "finetune" else []
        result = CliRunner().invoke(main, words + extra)
        assert result.exit_code == 0, (words, result.output)
    [record] = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    start, end = record["prediction"]
    assert record["answer"] == context[start:end]


def test_a_multi_task_predict_keeps_a_span_tasks_answer(tmp_path: Path, tiny_encoder: str) -> None:
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-qa,demo-nli", "--max-steps", "2", "--encoder",
                                       tiny_encoder, *QUICK, "--output", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    context = "He received warfarin 5 mg twice a day for atrial fibrillation."
    (tmp_path / "in.txt").write_text(f"Which drug was started?\t{context}\n")
    result = CliRunner().invoke(main, ["predict", str(tmp_path / "run"), "--tasks", "demo-qa,demo-nli", "--input",
                                       str(tmp_path / "in.txt"), "--output", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    [record] = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    start, end = record["prediction"]["demo-qa"]
    assert record["answer"] == {"demo-qa": context[start:end]}
    assert record["prediction"]["demo-nli"] in ("entailment", "contradiction", "neutral")


# ---- G18: the docs' export example of a pair task, under the recipe that picks the bi form ---------------------
def test_the_docs_pair_task_export_runs_when_auto_would_choose_the_bi_form(
        tmp_path: Path, tiny_encoder: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mtbio.experiments.training_run as training_run

    monkeypatch.setattr(training_run, "choose_pair_form", lambda task, scores: "bi")  # what MiniLM's auto picks
    monkeypatch.chdir(tmp_path)
    quick = ["--max-steps", "2", "--max-train-examples", "8", "--max-eval-examples", "16", "--max-length", "32",
             "--batch-size", "4", "--encoder", tiny_encoder, "--no-baselines"]
    commands = [[w.replace("../shared/data", str(data_dir)) for w in words]
                for words in _page_commands("docs/commands.md", "runs/mqp")]
    assert [words[0] for words in commands] == ["finetune", "export"]
    for words in commands:
        recipe = ["--pair-form", "auto"] if words[0] == "finetune" and "--pair-form" not in words else []
        result = CliRunner().invoke(main, words + (quick + recipe if words[0] == "finetune" else []))
        assert result.exit_code == 0, (words, result.output)
    assert (tmp_path / "exported" / "mqp" / "config.json").is_file()
    # the form auto chose is refused in one line that says how to get an exportable run
    finetune = [w for w in commands[0] if w not in ("--pair-form", "cross")]
    result = CliRunner().invoke(main, [*finetune[:-1], str(tmp_path / "bi"), *quick, "--pair-form", "auto"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["export", str(tmp_path / "bi" / "mqp"), "--task", "mqp", "--output",
                                       str(tmp_path / "e")])
    assert result.exit_code == 2
    assert result.output.startswith("error: task 'mqp' was trained in the bi pair form (cosine_classification, by "
                                    "auto: ")
    assert result.output.strip().endswith("whose head no transformers class carries; train it with --pair-form cross "
                                          "to export it, or serve this run with mtbio predict or mtbio.load")
