"""Refine / finetune / evaluate / predict end to end on the packaged samples with a tiny random BERT."""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mtbio.errors import MtbioError
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.finetune import finetune
from mtbio.experiments.refine import refine
from mtbio.experiments.common import train_examples_of
from mtbio.model.inference import bf16_supported
from mtbio.training.config import RunConfig
from mtbio.training.flops import cpu_fields, machine_key
from mtbio.training.trainer import TrainerState, steady_throughput, warm_up_steps

SAMPLE_DEFS = str(SAMPLE_DIR / "task_defs")
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _config(tmp: Path, encoder: str, **overrides: object) -> RunConfig:
    values = dict(tasks=["demo-ner", "demo-relation", "demo-sts"], task_defs=[SAMPLE_DEFS], data_dir=str(SAMPLE_DIR),
                  encoder=encoder, output=str(tmp / "refine"), max_steps=6, batch_size=8, max_train_examples=40,
                  seed=3, max_length=48)
    values.update(overrides)
    return RunConfig(**values)


def test_refine_writes_a_complete_run_directory(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir, results = refine(_config(tmp_path, tiny_encoder))
    assert (run_dir / "encoder" / "config.json").is_file()
    assert (run_dir / "encoder" / "model.safetensors").is_file()
    for task in ("demo-ner", "demo-relation", "demo-sts"):
        assert (run_dir / "heads" / task / "head_config.json").is_file()
        assert (run_dir / "heads" / task / "model.safetensors").is_file()
        assert (run_dir / "tasks" / f"{task}.yml").is_file()
    assert set(results["dev"]) == {"demo-ner", "demo-relation", "demo-sts"}
    assert "entity_f1" in results["dev"]["demo-ner"] and "pearson" in results["dev"]["demo-sts"]
    assert (run_dir / "config.yaml").is_file()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert {r["split"] for r in records} == {"dev", "train"}
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == [6]  # --log-every 50: the last step only
    assert set(train[0]["loss"]) == {"demo-ner", "demo-relation", "demo-sts"}
    assert train[0]["lr"] >= 0 and train[0]["grad_norm"] > 0 and train[0]["examples_per_second"] > 0
    assert results["steps"] == 6 and results["test"] == {}
    assert results["machine"] == machine_key() and f" | {torch.get_num_threads()} | " in results["machine"]
    if "cpu family" in cpu_fields():  # x86 Linux: the CPU's family and model number too
        assert " | family " in results["machine"]
    assert not list(run_dir.rglob("*.bin")) and not list(run_dir.rglob("*.pt")) and not list(run_dir.rglob("*.pkl"))


def test_finetune_from_refined_run_uses_its_encoder(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir, _ = refine(_config(tmp_path, tiny_encoder))
    [(ft_dir, results)] = finetune(_config(tmp_path, None, tasks=["demo-relation"], from_run=str(run_dir),
                                           output=str(tmp_path / "ft")))
    assert ft_dir == tmp_path / "ft" / "demo-relation"
    assert results["stage"] == "finetune" and results["encoder_source"] == str(run_dir / "encoder")
    assert sorted(p.name for p in (ft_dir / "heads").iterdir()) == ["demo-relation"]
    saved = json.loads((ft_dir / "results.json").read_text())
    assert saved["dev"]["demo-relation"]["micro_f1"] == results["dev"]["demo-relation"]["micro_f1"]


def test_finetune_starts_from_the_refined_head_unless_asked_for_a_new_one(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir, _ = refine(_config(tmp_path, tiny_encoder))
    refined = load_file(str(run_dir / "heads" / "demo-relation" / "model.safetensors"))
    tiny_step = dict(tasks=["demo-relation"], from_run=str(run_dir), max_steps=1, lr=1e-12, warmup=0.0)
    for heads, same in (("refined", True), ("new", False)):
        [(ft_dir, _)] = finetune(_config(tmp_path, None, output=str(tmp_path / heads), finetune_heads=heads, **tiny_step))
        tuned = load_file(str(ft_dir / "heads" / "demo-relation" / "model.safetensors"))
        close = all(torch.allclose(tuned[k], refined[k], atol=1e-6) for k in refined)
        assert close is same, heads
    config = run_dir / "heads" / "demo-relation" / "head_config.json"
    config.write_text(config.read_text().replace('"DDI-mechanism"', '"DDI-other"'))
    with pytest.raises(MtbioError, match="--finetune-heads new"):
        finetune(_config(tmp_path, None, output=str(tmp_path / "changed"), **tiny_step))


def test_saved_run_reloads_in_a_fresh_process_with_identical_predictions(tmp_path: Path, tiny_encoder: str) -> None:
    import mtbio

    run_dir, _ = refine(_config(tmp_path, tiny_encoder))
    texts = ["Aspirin may increase the effect of @DRUG$ when given with @DRUG$ .", "No interaction of @DRUG$ with @DRUG$ ."]
    before = mtbio.load(run_dir).predict("demo-relation", texts)
    tags_before = mtbio.load(run_dir).predict("demo-ner", ["Cisplatin induced nephrotoxicity in rats ."])
    script = (
        "import json, sys, mtbio\n"
        f"run = mtbio.load({str(run_dir)!r})\n"
        f"print(json.dumps([run.predict('demo-relation', {texts!r}), run.predict('demo-ner', ['Cisplatin induced nephrotoxicity in rats .'])]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=os.environ.copy())
    after, tags_after = json.loads(out.stdout.strip().splitlines()[-1])
    assert after == before and tags_after == tags_before
    # a project that never imports mtbio loads the encoder with plain transformers
    plain = ("from transformers import AutoModel, AutoTokenizer\n"
             f"m = AutoModel.from_pretrained({str(run_dir / 'encoder')!r}); t = AutoTokenizer.from_pretrained({str(run_dir / 'encoder')!r})\n"
             "import sys; print(type(m).__name__, 'mtbio' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, check=True, env=os.environ.copy())
    assert out.stdout.split() == ["BertModel", "False"]


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    newest = sorted((run_dir / "checkpoints").glob("step-*"))[-1]
    return load_file(str(newest / "model.safetensors"))


def _train_command(output: Path, encoder: str, stage: tuple[str, ...], *extra: str) -> list[str]:
    return [sys.executable, "-m", "mtbio", *stage, "--task-defs", SAMPLE_DEFS, "--data-dir", str(SAMPLE_DIR),
            "--encoder", encoder, "--output", str(output), "--max-steps", "12", "--batch-size", "8",
            "--max-train-examples", "48", "--save-every", "2", "--seed", "5", "--max-length", "48", *extra]


def _dev_history(run_dir: Path) -> list[tuple[int, dict]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["scores"]) for r in map(json.loads, lines) if r["split"] == "dev"]


def _assert_scores_close(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b)
        for key in a:
            _assert_scores_close(a[key], b[key])
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_scores_close(x, y)
    else:
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("stage, adapter", [
    pytest.param(("refine", "--tasks", "demo-ner,demo-relation"), (), id="full", marks=pytest.mark.long(
        reason="tests/test_resume_identity.py kills and resumes this refine in the default suite")),
    (("refine", "--tasks", "demo-ner,demo-relation"), ("--adapter", "lora")),  # one LoRA per task
    (("finetune", "--task", "demo-relation"), ("--adapter", "lora")),  # frozen encoder, one LoRA + head
], ids=["full", "lora-multi-task", "lora-single-task"])
def test_killed_run_resumes_to_the_same_weights(tmp_path: Path, tiny_encoder: str, stage: tuple[str, ...],
                                                adapter: tuple[str, ...]) -> None:
    """SIGKILL after a randomly chosen checkpoint, resume: same weights, dev history and results. The uninterrupted
    run trains in this process (click's runner), the killed one and its resume each in a process of their own."""
    import random

    from click.testing import CliRunner

    from mtbio.cli import main

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    extra = ("--eval-every", "4", *adapter)
    output = {"refine": "", "finetune": "demo-relation"}[stage[0]]  # finetune writes a folder per task
    straight_run = CliRunner().invoke(main, _train_command(tmp_path / "straight", tiny_encoder, stage, *extra)[3:])
    assert straight_run.exit_code == 0, straight_run.output[-2000:]

    kill_after = random.choice([2, 4, 6, 8])  # a checkpoint step; the process may run a little past it
    interrupted = tmp_path / "interrupted"
    proc = subprocess.Popen(_train_command(interrupted, tiny_encoder, stage, *extra), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    marker = interrupted / output / "checkpoints" / f"step-{kill_after:08d}" / "manifest.json"
    while time.time() < deadline and not marker.exists():
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (interrupted / output / "results.json").exists(), f"the run finished before it was killed ({kill_after})"
    resumed = subprocess.run(_train_command(interrupted, tiny_encoder, stage, *extra, "--resume"), env=env,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    straight, interrupted = tmp_path / "straight" / output, interrupted / output
    a, b = _final_weights(straight), _final_weights(interrupted)
    assert set(a) == set(b) and (not adapter or any(".lora_A." in k for k in a))
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=f"{key} after a kill at step {kill_after}")
    straight_history, resumed_history = _dev_history(straight), _dev_history(interrupted)
    assert [s for s, _ in resumed_history] == [s for s, _ in straight_history] == [4, 8, 12]
    _assert_scores_close([h for _, h in straight_history], [h for _, h in resumed_history])
    first = json.loads((straight / "results.json").read_text())
    second = json.loads((interrupted / "results.json").read_text())
    assert first["best_step"] == second["best_step"] and first["steps"] == second["steps"] == 12
    _assert_scores_close(first["dev"], second["dev"])


def test_rerun_without_resume_is_refused(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.errors import MtbioError

    refine(_config(tmp_path, tiny_encoder, max_steps=2))
    with pytest.raises(MtbioError, match="--resume"):
        refine(_config(tmp_path, tiny_encoder, max_steps=2))


def test_fp16_on_cpu_is_refused_clearly(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.errors import MtbioError

    if torch.cuda.is_available():
        pytest.skip("fp16 is valid on a GPU")
    with pytest.raises(MtbioError, match="fp16 needs a GPU"):
        refine(_config(tmp_path, tiny_encoder, mixed_precision="fp16"))


def test_evaluate_rescoring_matches_the_scores_saved_at_training(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.evaluate import evaluate_paths

    run_dir, _ = refine(_config(tmp_path, tiny_encoder))
    rescored = evaluate_paths([run_dir], "dev", SAMPLE_DIR)
    saved = evaluate_paths([run_dir], "dev", SAMPLE_DIR, rescore=False)
    assert rescored["tasks"] == saved["tasks"]
    # demo-sts is left out: an untrained tiny model predicts a near-constant score, whose Pearson
    # correlation is float noise; labels and tags are exact.
    for task in ("demo-ner", "demo-relation"):
        assert rescored["rows"][0]["scores"][task] == saved["rows"][0]["scores"][task]


def test_steady_throughput_leaves_out_the_warm_up_steps() -> None:
    assert [warm_up_steps(n) for n in (1, 5, 100, 1000)] == [1, 1, 10, 20]
    state = TrainerState(examples_seen=100, train_seconds=10.0, warm={"steps": 2, "examples": 20, "seconds": 2.0})
    assert steady_throughput(state) == {"steady_train_examples_per_second": 10.0, "steady_after_steps": 2}
    assert steady_throughput(TrainerState(examples_seen=20, train_seconds=2.0)) == {}  # never past the warm-up


def test_losses_are_read_on_the_host_only_every_few_steps(tmp_path: Path, tiny_encoder: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """No host read of a loss inside a training step: on a GPU each would wait for the queued kernels.
    With reads every 4 steps, 8 steps read the losses at the warm-up step, 4 and 8, one transfer each."""
    from mtbio.training import trainer as trainer_module
    from mtbio.training.step_engine import StepEngine

    monkeypatch.setattr(trainer_module, "read_interval", lambda device: 4)
    reads: list[str] = []
    inside_step = {"on": False}
    for name in ("item", "tolist", "__float__"):
        real = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *args: object, _real=real, _name=name) -> object:  # noqa: ANN001
            reads.append(f"{_name} in a step" if inside_step["on"] else _name)
            return _real(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counted)
    real_step = StepEngine.step

    def step(self: StepEngine, micro: list, state: TrainerState) -> str:
        inside_step["on"] = True
        try:
            return real_step(self, micro, state)
        finally:
            inside_step["on"] = False

    monkeypatch.setattr(StepEngine, "step", step)
    real_clip = StepEngine._clip_gradients

    def clip(self: StepEngine) -> object:
        # clipping reads its coefficient on a plain CPU run only, where a read waits for nothing (on a GPU it
        # leaves the clipping to Accelerate, which reads nothing)
        inside_step["on"] = False
        try:
            return real_clip(self)
        finally:
            inside_step["on"] = True

    monkeypatch.setattr(StepEngine, "_clip_gradients", clip)
    real_read = trainer_module.Trainer.read_losses
    read_at: list[int] = []

    def read(self: trainer_module.Trainer) -> None:
        if len(self.engine.losses):
            read_at.append(self.state.global_step)
        real_read(self)

    monkeypatch.setattr(trainer_module.Trainer, "read_losses", read)
    run_dir, results = refine(_config(tmp_path, tiny_encoder, max_steps=8))
    assert not [r for r in reads if r.endswith("in a step")]
    assert read_at == [warm_up_steps(8), 4, 8]
    assert results["steps"] == 8


def test_training_curves_every_log_every_steps_and_their_plot(tmp_path: Path, tiny_encoder: str) -> None:
    from click.testing import CliRunner

    from mtbio import cli

    run_dir, _ = refine(_config(tmp_path, tiny_encoder, log_every=2, max_steps=5, eval_every=5))
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == [2, 4, 5]  # every 2 steps, and the last
    # each task's loss is the mean of its own batches since the previous line; 5 steps of 3 tasks
    assert sum(len(r["loss"]) for r in train) >= 3 and all(v > 0 for r in train for v in r["loss"].values())
    lrs = [r["lr"] for r in train]
    assert lrs[0] > lrs[1] > lrs[2]  # linear decay after the warm-up
    result = CliRunner().invoke(cli.main, ["report", str(run_dir), "--curves"])
    assert result.exit_code == 0, result.output
    png = run_dir / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_log_lines_reach_the_terminal_and_the_runs_run_log(tmp_path: Path, tiny_encoder: str) -> None:
    """INFO lines (here: truncation counts, the resume point) show on stderr and stay in run.log; -q hides them."""
    mtbio = str(Path(sys.executable).parent / "mtbio")
    args = ["finetune", "--task", "demo-nli", "--task-defs", SAMPLE_DEFS, "--data-dir", str(SAMPLE_DIR),
            "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "8", "--max-train-examples", "16",
            "--max-length", "12", "--output", str(tmp_path / "run")]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    first = subprocess.run([mtbio, *args], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "examples truncated" in first.stderr
    log = (tmp_path / "run" / "demo-nli" / "run.log").read_text()
    assert "demo-nli/train:" in log and "examples truncated" in log and " INFO " in log
    again = subprocess.run([mtbio, "-q", *args, "--max-steps", "3", "--resume"], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed from" not in again.stderr and "train:" not in again.stderr  # -q: no log lines, no bars ...
    assert again.stderr == "" and "single-task run:" in again.stdout  # ... but the results
    assert "resumed from" in (tmp_path / "run" / "demo-nli" / "run.log").read_text()  # ... the log keeps it all


def test_trackers_get_the_config_and_the_same_scalars_as_metrics_jsonl(tmp_path: Path, tiny_encoder: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """--report-to goes through Accelerate's trackers: init with the run's config, log every metrics.jsonl line."""
    from accelerate.tracking import GeneralTracker

    from mtbio.experiments import training_run
    from mtbio.training import trainer

    class Recorder(GeneralTracker):
        name = "recorder"
        requires_logging_directory = False

        def __init__(self) -> None:
            super().__init__()
            self.config: dict | None = None
            self.logs: list[tuple[int, dict]] = []
            self.finished = False

        @property
        def tracker(self) -> "Recorder":
            return self

        def store_init_configuration(self, values: dict) -> None:
            self.config = values

        def log(self, values: dict, step: int | None = None, **kwargs: object) -> None:
            self.logs.append((step, values))

        def finish(self) -> None:
            self.finished = True

    recorder = Recorder()
    monkeypatch.setattr(training_run, "make_accelerator",
                        lambda precision, report_to, project_dir: trainer.make_accelerator(precision, [recorder]))
    run_dir, _ = refine(_config(tmp_path, tiny_encoder, log_every=3, eval_test=False))
    assert recorder.config is not None and recorder.config["batch_size"] == 8 and recorder.config["stage"] == "refine"
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [step for step, _ in recorder.logs] == [r["step"] for r in lines]
    train = set().union(*(values for _, values in recorder.logs if "train/lr" in values))
    assert {"train/loss/demo-ner", "train/loss/demo-sts", "train/grad_norm", "train/examples_per_second"} <= train
    dev = recorder.logs[-1][1]
    assert dev["dev/demo-ner/entity_f1"] == lines[-1]["scores"]["demo-ner"]["entity_f1"]
    assert recorder.finished
    with pytest.raises(Exception, match="unknown tracker"):
        RunConfig(report_to=["tensorbored"])
    assert RunConfig(report_to=["none"]).report_to == []


def test_tensorboard_event_file_holds_the_scalars_of_metrics_jsonl(tmp_path: Path, tiny_encoder: str) -> None:
    """--report-to tensorboard through Accelerate: the event file, read back with tensorboard's own
    reader, has every training-loss and dev-score value of metrics.jsonl at its step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = refine(_config(tmp_path, tiny_encoder, log_every=2, report_to=["tensorboard"]))
    events = sorted(run_dir.rglob("events.out.tfevents.*"))
    assert events, sorted(p.name for p in run_dir.rglob("*"))
    scalars: dict[str, dict[int, float]] = {}
    for directory in {p.parent for p in events}:  # the scalars' file, and Accelerate's hyperparameter file
        reader = EventAccumulator(str(directory))
        reader.Reload()
        scalars.update({tag: {e.step: e.value for e in reader.Scalars(tag)} for tag in reader.Tags()["scalars"]})
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    expected = {}
    for line in lines:
        if line["split"] == "train":
            expected.update({(f"train/loss/{task}", line["step"]): loss for task, loss in line["loss"].items()})
        elif line["split"] == "dev":
            expected.update({(f"dev/{task}/{metric}", line["step"]): value
                             for task, scores in line["scores"].items() for metric, value in scores.items()})
    assert any(tag.startswith("train/loss/") for tag, _ in expected) and any(t.startswith("dev/") for t, _ in expected)
    for (tag, step), value in expected.items():
        assert scalars[tag][step] == pytest.approx(value, rel=1e-6), (tag, step)


def test_accelerate_launch_precision_is_used_without_the_flag(tmp_path: Path, tiny_encoder: str) -> None:
    """`accelerate launch --mixed_precision bf16 -m mtbio finetune ...` trains in bf16 (CPUs with bf16 only)."""
    if not bf16_supported("cpu"):
        pytest.skip("this CPU has no bf16")
    launch = [str(Path(sys.executable).parent / "accelerate"), "launch", "--cpu", "--num_processes", "1",
              "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no", "-m", "mtbio"]
    args = ["finetune", "--task", "demo-nli", "--task-defs", SAMPLE_DEFS, "--data-dir", str(SAMPLE_DIR), "--encoder",
            tiny_encoder, "--max-steps", "1", "--batch-size", "4", "--max-train-examples", "8", "--max-length", "32",
            "--output", str(tmp_path / "run")]
    done = subprocess.run([*launch, *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "demo-nli" / "results.json").read_text())["mixed_precision"] == "bf16"


def test_results_json_has_one_writer_and_reader(tmp_path: Path) -> None:
    """results.json round-trips through `mtbio.training.results`; a missing or broken one is an
    MtbioError naming the file."""
    import re

    from mtbio.run_dir import RunDir

    path = re.escape(str(tmp_path / "results.json"))
    assert not RunDir(tmp_path).finished
    with pytest.raises(MtbioError, match=f"{path}: missing"):
        RunDir(tmp_path).results()
    RunDir(tmp_path).write_results({"stage": "refine", "dev": {"demo-ner": {"entity_f1": 0.5}}})
    assert RunDir(tmp_path).finished
    assert RunDir(tmp_path).results() == {"stage": "refine", "dev": {"demo-ner": {"entity_f1": 0.5}}}
    for broken in ("{not json", "[1, 2]"):
        (tmp_path / "results.json").write_text(broken)
        with pytest.raises(MtbioError, match=f"{path}: unreadable"):
            RunDir(tmp_path).results()


def test_a_lower_is_better_metric_keeps_its_best_checkpoint(tmp_path: Path, tiny_encoder: str) -> None:
    """Model selection reads the metric's direction: a task scored by mse keeps its lowest-error weights."""
    import yaml

    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.experiments.finetune import finetune
    from mtbio.training.config import RunConfig

    defs = tmp_path / "defs"
    defs.mkdir()
    sts = yaml.safe_load((SAMPLE_DIR / "task_defs" / "demo-sts.yml").read_text())
    (defs / "demo-sts.yml").write_text(yaml.safe_dump({**sts, "metric": "mse", "extra_metrics": []}))
    finetune(RunConfig(tasks=["demo-sts"], task_defs=[str(defs)], data_dir=str(SAMPLE_DIR), encoder=tiny_encoder,
                       output=str(tmp_path / "run"), max_steps=8, eval_every=1, batch_size=8, lr=1e-3,
                       max_length=48, seed=3))
    run = next(p.parent for p in (tmp_path / "run").rglob("results.json"))
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    mse = {e["step"]: e["scores"]["demo-sts"]["mse"] for e in evals if e.get("split") == "dev"}
    assert len(set(mse.values())) > 1
    results = json.loads((run / "results.json").read_text())
    assert results["best_step"] == min(mse, key=mse.get)
    assert results["dev"]["demo-sts"]["mse"] == min(mse.values())


def test_a_run_that_learns_nothing_says_so_and_its_card_too(tmp_path: Path, tiny_encoder: str) -> None:
    """A task left within a point of its trivial score (its floor here) gets a warning line, `below_floor` in
    results.json (beside each task's trivial score and floor) and a "Below its floor" line on its exported card."""
    import json

    from click.testing import CliRunner

    from mtbio.cli import main
    from mtbio.experiments.demo import SAMPLE_DIR

    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                     "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "1",
                                     "--lr", "1e-9", "--output", str(run)])
    assert done.exit_code == 0, done.output
    assert "demo-nli: below its floor: dev accuracy" in done.output
    results = json.loads((run / "demo-nli" / "results.json").read_text())
    assert results["below_floor"] == ["demo-nli"] and 0 < results["trivial"]["demo-nli"] < 1
    done = CliRunner().invoke(main, ["export", str(run / "demo-nli"), "--task", "demo-nli", "--output",
                                     str(tmp_path / "export")])
    assert done.exit_code == 0, done.output
    assert "**Below its floor:**" in (tmp_path / "export" / "README.md").read_text()


def test_task_examples_caps_one_task_beside_the_others() -> None:
    config = RunConfig(max_train_examples=100, task_examples=["ddi=20", "hoc=5"])
    assert train_examples_of(config, "ddi") == 20 and train_examples_of(config, "chemprot") == 100
    with pytest.raises(ValueError, match="expected TASK=N"):
        RunConfig(task_examples=["ddi"])


def test_training_on_a_cpu_sizes_the_onednn_primitive_cache_unless_the_environment_sets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN caches buffers per batch shape and the resident memory grows with it: off in fp32; in bf16, whose CPU
    matmuls need it, 256 primitives on a CPU with AMX and 32 on others; ideep's second cache one entry
    (mtbio/training/host_memory.py)."""
    from mtbio.training import trainer
    from mtbio.training.host_memory import CACHE_VARIABLE, IDEEP_CACHE_VARIABLE, bound_host_memory

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.delenv(IDEEP_CACHE_VARIABLE, raising=False)
    trainer.make_accelerator("no")
    assert os.environ[CACHE_VARIABLE] == "0"
    monkeypatch.delenv(CACHE_VARIABLE)
    for amx, primitives in ((True, "256"), (False, "32")):
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
        monkeypatch.delenv(CACHE_VARIABLE, raising=False)
        bound_host_memory("bf16")
        assert os.environ[CACHE_VARIABLE] == primitives and os.environ[IDEEP_CACHE_VARIABLE] == "1"
    monkeypatch.setenv(CACHE_VARIABLE, "1024")
    monkeypatch.setenv(IDEEP_CACHE_VARIABLE, "64")
    trainer.make_accelerator("no")
    assert os.environ[CACHE_VARIABLE] == "1024" and os.environ[IDEEP_CACHE_VARIABLE] == "64"


FAULTS_OVER_BIG_TENSORS = """
import os, resource, sys, torch
from mtbio.training.host_memory import keep_freed_heap
def rounds(n):  # three 64 MiB tensors alive at once, then freed
    for _ in range(n):
        tensors = [torch.ones(2**24) for _ in range(3)]
        del tensors
kept = keep_freed_heap()
rounds(3)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(10)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"), reason="glibc")
def test_cpu_training_reuses_freed_heap_instead_of_faulting_pages_in_again() -> None:
    """glibc maps each block over 32 MiB afresh and unmaps it when freed: 30 tensors of 64 MiB fault 30 x 16,384
    pages in. mtbio keeps such blocks in the heap, and most of them reuse pages already there; MTBIO_KEEP_FREED_HEAP=0
    and glibc's own variables leave glibc as it is."""
    def run(**variables: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "MTBIO_KEEP"))} | variables
        done = subprocess.run([sys.executable, "-c", FAULTS_OVER_BIG_TENSORS], capture_output=True, text=True,
                              timeout=120, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split()

    kept, off, glibc_set = run(), run(MTBIO_KEEP_FREED_HEAP="0"), run(MALLOC_TRIM_THRESHOLD_=str(2**20))
    assert kept[0] == "True" and int(kept[1]) < 30 * 16384 / 2, kept
    for plain in (off, glibc_set):
        assert plain[0] == "False" and int(plain[1]) >= 30 * 16384 * 0.95, plain


def test_the_trainer_keeps_freed_heap_on_a_cpu(tiny_encoder: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from mtbio.cli import main
    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.training import trainer

    calls: list[bool] = []
    monkeypatch.setattr(trainer, "keep_freed_heap", lambda: calls.append(True))
    done = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                     "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "1",
                                     "--output", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert calls == [True]


HEAP_IN_USE_OVER_SHAPES = f"""
import sys, torch
sys.path.insert(0, {str(BENCHMARKS)!r})
from common import glibc_heap
from mtbio.training.host_memory import bound_host_memory
bound_host_memory("bf16")
layer = torch.nn.Linear(384, 1536)
def run(width):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layer(torch.randn(4, width, 384, requires_grad=True)).float().sum().backward()
run(8)
before = glibc_heap().uordblks
for width in range(16, 336, 8):
    run(width)
print(glibc_heap().uordblks - before)
"""


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
                         and bf16_supported("cpu")), reason="glibc's mallinfo2 and a CPU with bf16")
def test_bf16_matmuls_over_many_shapes_keep_one_primitive_cache_not_two() -> None:
    """ideep's per-shape cache (LRU_CACHE_CAPACITY, 1,024 by default) doubled oneDNN's: mtbio sizes it to one
    entry, so the heap in use grows about half as much over 40 batch widths (bf16 forward and backward)."""
    def growth(extra: dict[str, str]) -> int:
        env = {k: v for k, v in os.environ.items() if k not in ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY")}
        done = subprocess.run([sys.executable, "-c", HEAP_IN_USE_OVER_SHAPES], capture_output=True, text=True,
                              timeout=120, env={**env, **extra})
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    two_caches, mtbio_default = growth({"LRU_CACHE_CAPACITY": "1024"}), growth({})
    assert mtbio_default < 0.75 * two_caches, (mtbio_default, two_caches)


def test_trace_memory_records_every_step_of_a_real_refine(tiny_encoder: str, tmp_path: Path) -> None:
    script = BENCHMARKS / "trace_memory.py"
    done = subprocess.run([sys.executable, str(script), "--name", "t", "--data-dir", str(SAMPLE_DIR),
                           "--task-defs", str(SAMPLE_DIR / "task_defs"), "--tasks", "demo-ner,demo-sts",
                           "--encoder", tiny_encoder, "--max-steps", "3", "--mixed-precision", "no",
                           "--trim-every", "2", "--results-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "LRU_CACHE_CAPACITY": "7"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "trace_memory-t.json").read_text())
    assert result["environment"]["LRU_CACHE_CAPACITY"] == "7" and result["trim_every"] == 2
    assert [row["step"] for row in result["steps"]] == [1, 2, 3]
    for row in result["steps"]:
        assert row["batch"][0] in ("demo-ner", "demo-sts") and row["heap_in_use_mb"] > 0 and row["rss_mb"] > 0


@pytest.mark.parametrize("scale", [0.01, 10.0, float("nan")])
def test_cpu_clipping_is_torchs_and_skips_the_pass_that_would_multiply_by_one(scale: float) -> None:
    """The step engine's clipping on a CPU gives torch's `clip_grad_norm_` gradients to the bit (clipped, not
    clipped, non-finite) and leaves the gradients untouched when the coefficient is 1."""
    from types import SimpleNamespace

    from accelerate import Accelerator

    from mtbio.training.step_engine import StepEngine

    torch.manual_seed(0)
    model, reference = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        mine.grad = torch.randn(mine.shape) * scale
        theirs.grad = mine.grad.clone()
    versions = [p.grad._version for p in model.parameters()]
    engine = SimpleNamespace(accelerator=Accelerator(cpu=True), model=model, options=SimpleNamespace(max_grad_norm=1.0))
    norm = StepEngine._clip_gradients(engine)
    expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    assert torch.equal(norm, expected) or (norm.isnan() and expected.isnan())
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.equal(mine.grad, theirs.grad) or (mine.grad.isnan().all() and theirs.grad.isnan().all())
    touched = [p.grad._version != v for p, v in zip(model.parameters(), versions)]
    assert touched == [scale != 0.01] * 2
