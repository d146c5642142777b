"""Runs that survive faults: corrupt checkpoints, full disks, non-finite losses, tampered or
pickled run directories. Everything on the packaged demo data with the tiny encoder."""
from __future__ import annotations

import json
import logging
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

import mtbio
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.refine import refine
from mtbio.model.multitask import MultiTaskModel
from mtbio.training import checkpoint as ckpt
from mtbio.training.config import RunConfig

SAMPLE_DEFS = str(SAMPLE_DIR / "task_defs")


def _config(output: Path, encoder: str, **overrides: object) -> RunConfig:
    values = dict(tasks=["demo-ner", "demo-relation"], task_defs=[SAMPLE_DEFS], data_dir=str(SAMPLE_DIR),
                  encoder=encoder, output=str(output), max_steps=4, save_every=2, batch_size=8,
                  max_train_examples=32, seed=7, max_length=48)
    values.update(overrides)
    return RunConfig(**values)


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    # copies: safetensors maps the file, and the tests overwrite files in place
    return {k: v.clone() for k, v in load_file(str(checkpoint / "model.safetensors")).items()}


def test_corrupt_newest_checkpoint_resumes_from_the_one_before(tmp_path: Path, tiny_encoder: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    run_dir, _ = refine(_config(tmp_path / "run", tiny_encoder))
    checkpoints = run_dir / "checkpoints"
    assert [p.name for p in ckpt.list_checkpoints(checkpoints)] == ["step-00000002", "step-00000004"]
    expected = _weights(checkpoints / "step-00000004")

    weights = checkpoints / "step-00000004" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    weights.write_bytes(bytes(data))
    assert ckpt.latest_checkpoint(checkpoints) == checkpoints / "step-00000002"

    with caplog.at_level(logging.WARNING):
        refine(_config(tmp_path / "run", tiny_encoder, resume=True))
    assert "model.safetensors does not match its checksum" in caplog.text
    assert ckpt.verify_checkpoint(checkpoints / "step-00000004") is None  # rewritten, intact
    for key, value in _weights(checkpoints / "step-00000004").items():
        torch.testing.assert_close(value, expected[key], rtol=1e-5, atol=1e-6)


def test_unwritable_output_fails_clearly(tmp_path: Path, tiny_encoder: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-relation", "--task-defs", SAMPLE_DEFS,
                                       "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder,
                                       "--output", str(blocker / "run"), "--max-steps", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"error: cannot write {blocker / 'run'}: a part of the path is a file" in result.output


@pytest.fixture
def nan_at_second_training_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loss of the second training forward pass is NaN (as after a corrupt label)."""
    real_forward = MultiTaskModel.forward
    calls = {"n": 0}

    def forward(self: MultiTaskModel, task: str, labels: torch.Tensor | None = None, **batch: object):  # noqa: ANN202
        out = real_forward(self, task, labels=labels, **batch)
        if self.training and out.loss is not None:
            calls["n"] += 1
            if calls["n"] == 2:
                out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(MultiTaskModel, "forward", forward)


@pytest.mark.parametrize("read_every", [1, 4])
def test_nonfinite_loss_stops_with_step_task_and_examples(tmp_path: Path, tiny_encoder: str, read_every: int,
                                                          nan_at_second_training_step: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Read at every step (a CPU) or every 4th (a GPU): the error names the batch of step 2, and no
    checkpoint holds the weights it spoilt."""
    monkeypatch.setattr("mtbio.training.trainer.read_interval", lambda device: read_every)
    with pytest.raises(MtbioError, match=r"non-finite loss at step 2, task 'demo-(ner|relation)', batch of 8 "
                                         r"examples starting with \[.+\].*--skip-nonfinite"):
        refine(_config(tmp_path / "run", tiny_encoder, max_steps=6, save_every=3))
    assert not ckpt.list_checkpoints(tmp_path / "run" / "checkpoints")


def test_skip_nonfinite_skips_and_records_the_batch(tmp_path: Path, tiny_encoder: str,
                                                    nan_at_second_training_step: None,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        run_dir, results = refine(_config(tmp_path / "run", tiny_encoder, skip_nonfinite=True))
    [skipped] = results["skipped_batches"]
    assert skipped["step"] == 2 and skipped["task"] in ("demo-ner", "demo-relation") and len(skipped["uids"]) == 8
    assert "skipped a batch: non-finite loss at step 2" in caplog.text
    assert results["steps"] == 4
    assert json.loads((run_dir / "results.json").read_text())["skipped_batches"] == [skipped]
    for value in _weights(run_dir / "checkpoints" / "step-00000004").values():
        assert torch.isfinite(value).all()


def test_loading_and_resuming_never_unpickle(tmp_path: Path, tiny_encoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _ = refine(_config(tmp_path / "run", tiny_encoder))

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    assert mtbio.load(run_dir).predict("demo-relation", ["@DRUG$ increases @DRUG$ levels ."])
    _, results = refine(_config(tmp_path / "run", tiny_encoder, resume=True, max_steps=6))
    assert results["steps"] == 6


@pytest.fixture
def saved_run(tmp_path: Path, tiny_encoder: str) -> Path:
    run_dir, _ = refine(_config(tmp_path / "run", tiny_encoder, max_steps=1, save_every=None))
    return run_dir


def _refused(run_dir: Path, match: str) -> None:
    with pytest.raises(MtbioError, match=match):
        mtbio.load(run_dir)


def test_unexpected_file_in_a_head_directory_is_refused(saved_run: Path) -> None:
    (saved_run / "heads" / "demo-relation" / "extra.pkl").write_bytes(b"\x80\x04N.")
    _refused(saved_run, r"heads/demo-relation: unexpected file\(s\) \['extra.pkl'\]")


def test_head_config_with_an_unknown_field_is_refused(saved_run: Path) -> None:
    path = saved_run / "heads" / "demo-relation" / "head_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "activation": "gelu"}))
    _refused(saved_run, r"head_config.json: invalid head config \(unexpected fields \['activation'\]\)")


def test_head_config_with_a_wrong_label_count_is_refused(saved_run: Path) -> None:
    path = saved_run / "heads" / "demo-relation" / "head_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "labels": config["labels"] + ["extra-label"]}))
    _refused(saved_run, r"model.safetensors: weights do not match the head config")


def test_missing_head_weights_are_refused(saved_run: Path) -> None:
    shutil.rmtree(saved_run / "heads" / "demo-ner")
    (saved_run / "heads" / "demo-ner").mkdir()
    (saved_run / "heads" / "demo-ner" / "head_config.json").write_text("{}")
    _refused(saved_run, r"heads/demo-ner: missing model.safetensors")


def test_a_second_process_cannot_train_in_a_directory_in_use(tmp_path: Path, tiny_encoder: str) -> None:
    """Two copies of a script resuming the same cell once wrote over each other's checkpoints: the second is
    refused with one line naming the holder, and the directory is free again once the holder has ended."""
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
         "f.write('mtbio process 4242 on elsewhere'); f.flush(); print('held', flush=True); sys.stdin.read()",
         str(run / ".training.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        args = ["refine", "--tasks", "demo-relation", "--task-defs", SAMPLE_DEFS, "--data-dir", str(SAMPLE_DIR),
                "--encoder", tiny_encoder, "--output", str(run), "--max-steps", "1", "--resume"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert f"error: {run}: mtbio process 4242 on elsewhere is training in this directory" in result.output
        assert sorted(p.name for p in run.iterdir()) == [".training.lock"]  # nothing of the holder's touched
    finally:
        holder.communicate("")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert (run / "results.json").is_file() and not (run / ".training.lock").exists()  # the lock goes with the run


def test_a_run_that_fails_before_writing_leaves_no_directory(tmp_path: Path, tiny_encoder: str) -> None:
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-relation", "--task-defs", SAMPLE_DEFS,
                                       "--data-dir", str(tmp_path), "--encoder", tiny_encoder,
                                       "--output", str(run), "--max-steps", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert not run.exists()


def test_the_lock_taken_is_the_one_on_disk_when_its_last_holder_removed_it(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder removes the lock file as it finishes: a newcomer that opened the old file just before must not
    hold a lock nobody else can see; it opens the fresh file and locks that."""
    import fcntl
    import os

    from mtbio.run_dir import RunDir

    real_flock, calls = fcntl.flock, []

    def flock_after_a_removal(handle, operation):  # the first time: the old holder removes the file meanwhile
        if not calls:
            os.unlink(tmp_path / ".training.lock")
        calls.append(operation)
        return real_flock(handle, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_removal)
    with RunDir(tmp_path).held():
        lock = tmp_path / ".training.lock"
        assert len(calls) == 2 and lock.is_file() and lock.read_text().startswith(f"mtbio process {os.getpid()}")
    assert not lock.exists()
