"""Sweeps shared between launchers: cell locks, two processes on one directory (and one killed),
failed cells retried, --keep-weights and the dry run's disk estimate, --parallel, Ray and SLURM (submitit)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import mtbio.experiments.sweep as sweep
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments import cell_locks
from mtbio.experiments.pairwise import pairwise
from mtbio.experiments.study_config import StudyConfig

THREE = ["kw-few", "kw-all", "kw-noise"]


def _config(keyword_tasks: tuple[str, str], encoder: str, output: Path, **overrides: object) -> StudyConfig:
    defs, data = keyword_tasks
    values = dict(tasks=THREE, task_defs=[defs], data_dir=data, encoder=encoder, output=str(output), epochs=1,
                  batch_size=8, lr=5e-3, seeds=1)
    values.update(overrides)
    return StudyConfig(**values)


def _cli(keyword_tasks: tuple[str, str], encoder: str, output: Path, *extra: str) -> list[str]:
    defs, data = keyword_tasks
    return [sys.executable, "-m", "mtbio", "pairwise", "--tasks", ",".join(THREE), "--task-defs", defs,
            "--data-dir", data, "--encoder", encoder, "--output", str(output), "--seeds", "1", "--epochs", "1",
            "--batch-size", "8", "--lr", "5e-3", *extra]


def _env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")


def _started_cells(output: str) -> list[str]:
    return re.findall(r"^\[\d+/\d+\] (.*?) → ", output, re.M)


def _edges(relations: dict) -> dict:
    return {(e["source"], e["target"]): e["delta"] for e in relations["edges"]}


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory, micro_encoder: str,
               keyword_tasks: tuple[str, str]) -> dict:
    """relations.json of the 3-task sweep run with --launcher local, one cell after another."""
    _, relations = pairwise(_config(keyword_tasks, micro_encoder, tmp_path_factory.mktemp("sequential") / "s"),
                            echo=lambda _: None)
    assert relations is not None
    return relations


# ---- locks ---------------------------------------------------------------------------------------
def test_a_lock_is_stale_when_its_owner_is_gone_or_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cell = tmp_path / "pairs" / "a+b" / "seed-42"
    lock = cell_locks.claim(cell)
    assert lock is not None and cell_locks.claim(cell) is None  # held by a live owner (this process)
    owner = json.loads(cell_locks.lock_path(cell).read_text())
    assert owner["host"] == socket.gethostname() and owner["pid"] == os.getpid() and owner["started"] <= time.time()
    lock.release()
    assert not cell_locks.lock_path(cell).exists()

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = cell_locks.lock_path(cell)
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "job_id": None, "started": time.time()}))
    assert cell_locks.is_stale(path)  # its process has ended
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "job_id": "77_3", "started": time.time()}))
    assert not cell_locks.is_stale(path)  # another host, fresh heartbeat
    old = time.time() - cell_locks.STALE_SECONDS - 5
    os.utime(path, (old, old))
    assert cell_locks.is_stale(path)  # another host, silent too long
    taken = cell_locks.claim(cell)
    assert taken is not None and json.loads(path.read_text())["pid"] == os.getpid()
    monkeypatch.setattr(cell_locks, "HEARTBEAT_SECONDS", 0.05)
    taken.release()
    beating = cell_locks.claim(cell)
    assert beating is not None
    os.utime(path, (old, old))
    time.sleep(0.3)
    assert time.time() - path.stat().st_mtime < 1  # the heartbeat touched it again
    beating.release()


# ---- two launchers on one directory --------------------------------------------------------------
def test_two_processes_split_the_cells_and_train_each_once(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], sequential: dict) -> None:
    command = _cli(keyword_tasks, micro_encoder, tmp_path / "s")
    first, second = (subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(2))
    outputs = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outputs[0][1][-2000:] + outputs[1][1][-2000:]
    started = [_started_cells(out) for out, _ in outputs]
    assert sorted(started[0] + started[1]) == sorted(set(started[0] + started[1])) and len(started[0] + started[1]) == 6
    assert started[0] and started[1]  # both did some of the work
    assert len(list((tmp_path / "s").rglob("results.json"))) == 6 and not list((tmp_path / "s").rglob("*.lock"))
    relations = json.loads((tmp_path / "s" / "relations.json").read_text())
    assert _edges(relations) == pytest.approx(_edges(sequential), abs=1e-6)
    assert not list((tmp_path / "s").rglob("*.safetensors"))  # --keep-weights none (the default)


def test_a_killed_launcher_leaves_its_cell_to_the_other(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    command = _cli(keyword_tasks, micro_encoder, tmp_path / "s")
    survivor = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held = None
    deadline = time.time() + 120
    while held is None and time.time() < deadline and victim.poll() is None:
        for path in (tmp_path / "s").rglob("seed-*.lock"):
            owner = cell_locks.read_owner(path)
            if owner and owner.get("pid") == victim.pid:
                os.kill(victim.pid, signal.SIGSTOP)  # freeze it, then make sure the cell is still unfinished
                if not (path.with_name(path.name[:-len(".lock")]) / "results.json").exists():
                    held = path
                    break
                os.kill(victim.pid, signal.SIGCONT)  # it had just finished this cell: wait for its next one
        time.sleep(0.1)
    if held is None:
        survivor.kill()
        pytest.skip("the second launcher never held an unfinished cell")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    out, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err[-3000:]
    killed_cell = held.with_name(held.name[:-len(".lock")])
    assert (killed_cell / "results.json").is_file()
    assert str(killed_cell) in out  # the survivor took the dead owner's cell over and trained it
    assert len(list((tmp_path / "s").rglob("results.json"))) == 6 and (tmp_path / "s" / "relations.json").is_file()


# ---- failures ------------------------------------------------------------------------------------
def test_a_failed_cell_is_recorded_and_retried(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.train_tasks
    attempts: list[str] = []

    def flaky(tasks, config, run_dir, *args, **kwargs):  # type: ignore[no-untyped-def]
        attempts.append(run_dir.name + ":" + run_dir.parent.name)
        if run_dir.parent.name == "kw-few+kw-all":
            run_dir.mkdir(parents=True, exist_ok=True)
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(tasks, config, run_dir, *args, **kwargs)

    monkeypatch.setattr(sweep, "train_tasks", flaky)
    config = _config(keyword_tasks, micro_encoder, tmp_path / "s", tasks=["kw-few", "kw-all"], retries=2)
    with pytest.raises(MtbioError, match=r"pair kw-few \+ kw-all, seed 42 failed \(RuntimeError: CUDA out of memory"):
        pairwise(config, echo=lambda _: None)
    assert attempts.count("seed-42:kw-few+kw-all") == 3  # the first try and two retries
    record = json.loads((tmp_path / "s/pairs/kw-few+kw-all/seed-42.failed.json").read_text())
    assert len(record) == 3 and record[0]["host"] == socket.gethostname() and "simulated" in record[0]["traceback"]
    assert (tmp_path / "s" / "relations.json").is_file()  # written from the finished cells
    assert not list((tmp_path / "s").rglob("*.lock"))

    status = CliRunner().invoke(main, ["sweep", "status", str(tmp_path / "s")])
    assert status.exit_code == 0, status.output
    rows = status.output.splitlines()
    assert rows[1].startswith("done     baseline kw-few, seed 42") and "kw-few accuracy 0." in rows[1]
    assert rows[3].startswith("failed   pair kw-few + kw-all, seed 42") and "3 attempt(s)" in rows[3]
    assert "CUDA out of memory" in rows[3] and "2 done, 0 running, 1 failed, 0 waiting" in status.output
    lock = cell_locks.claim(tmp_path / "s/pairs/kw-few+kw-all/seed-42")  # as if a launcher were training it
    (tmp_path / "s/pairs/kw-few+kw-all/seed-42/run.log").write_text("step 3 of 12\n")
    running = CliRunner().invoke(main, ["sweep", "status", str(tmp_path / "s")]).output.splitlines()[3]
    assert lock is not None and running.startswith("running") and f"pid {os.getpid()}" in running
    assert "last: step 3 of 12" in running
    lock.release()

    monkeypatch.setattr(sweep, "train_tasks", real)
    with pytest.raises(MtbioError, match="failed"):  # attempts used up: not tried again
        pairwise(config, echo=lambda _: None)
    (tmp_path / "s/pairs/kw-few+kw-all/seed-42.failed.json").unlink()
    _, relations = pairwise(config, echo=lambda _: None)
    assert relations is not None and len(relations["edges"]) == 2


# ---- disk ----------------------------------------------------------------------------------------
def test_dry_run_disk_estimate_is_within_a_quarter_of_a_finished_sweep(
        tmp_path: Path, tiny_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    config = _config(keyword_tasks, tiny_encoder, tmp_path / "s", tasks=["kw-few", "kw-all"], keep_weights="best",
                     max_length=16)
    lines: list[str] = []
    pairwise(config.model_copy(update={"dry_run": True}), echo=lines.append)
    match = re.search(r"estimated disk: ~([\d.]+) (KB|MB|GB) when finished", lines[0])
    assert match, lines[0]
    estimate = float(match.group(1)) * {"KB": 1e3, "MB": 1e6, "GB": 1e9}[match.group(2)]
    pairwise(config, echo=lambda _: None)
    held = sweep.directory_bytes(tmp_path / "s")
    assert abs(estimate - held) / held < 0.25, (estimate, held)
    assert len(list((tmp_path / "s").rglob("encoder/model.safetensors"))) == 3  # best weights kept


# ---- launchers -----------------------------------------------------------------------------------
def test_a_signal_to_the_parallel_launcher_stops_its_workers_at_a_saved_step(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    """SIGTERM to `--parallel 2` reaches both workers: each checkpoints its cell and exits, none goes on alone."""
    command = _cli(keyword_tasks, micro_encoder, tmp_path / "s", "--parallel", "2", "--max-steps", "100000",
                   "--save-every", "100000", "--log-every", "1")
    launcher = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    owners: dict[Path, int] = {}
    deadline = time.time() + 180
    while len(owners) < 2 and time.time() < deadline and launcher.poll() is None:
        for path in (tmp_path / "s").rglob("seed-*.lock"):
            owner = cell_locks.read_owner(path)
            if owner and owner.get("pid") not in (None, launcher.pid):
                owners[path] = int(owner["pid"])
        time.sleep(0.2)
    assert len(owners) == 2, "both workers should hold a cell"
    cells = [lock.with_name(lock.name[:-len(".lock")]) for lock in owners]
    while not all((cell / "metrics.jsonl").is_file() for cell in cells) and time.time() < deadline:
        time.sleep(0.2)  # both are past loading, into their training steps
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=180)
    assert launcher.returncode != 0 and "stopped by a signal" in err
    for lock, pid in owners.items():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the worker is gone, not left training on its own
        cell = lock.with_name(lock.name[:-len(".lock")])
        assert not (cell / "results.json").exists()
        assert list((cell / "checkpoints").glob("step-*")), f"{cell}: no checkpoint to resume from"


def test_parallel_local_processes_match_the_sequential_sweep(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], sequential: dict) -> None:
    done = subprocess.run(_cli(keyword_tasks, micro_encoder, tmp_path / "s", "--parallel", "2"), env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 processes, " in done.stdout
    workers = {w for w in re.findall(r"^\[worker (\d)\] \[", done.stdout, re.M)}
    assert workers == {"0", "1"}
    relations = json.loads((tmp_path / "s" / "relations.json").read_text())
    assert _edges(relations) == pytest.approx(_edges(sequential), abs=1e-6)


def test_ray_launcher_matches_the_sequential_sweep(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], sequential: dict) -> None:
    """Two of the three tasks (three cells): their edges are the sequential sweep's."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources()["CPU"] == 2  # one CPU per cell: two cells at a time
        lines: list[str] = []
        _, relations = pairwise(_config(keyword_tasks, micro_encoder, tmp_path / "s", launcher="ray", cell_cpus=1,
                                        tasks=THREE[:2]), echo=lines.append)
    finally:
        ray.shutdown()
    assert "3 cells sent to Ray (1 CPU, 0 GPU each)" in lines
    assert sum(line.startswith("done: ") for line in lines) == 3
    between = {pair: delta for pair, delta in _edges(sequential).items() if set(pair) <= set(THREE[:2])}
    assert len(between) == 2 and relations is not None and _edges(relations) == pytest.approx(between, abs=1e-6)
    owners = {json.loads(p.read_text())["tasks"][0] for p in (tmp_path / "s").rglob("results.json")}
    assert owners == set(THREE[:2])


def _all_done(sweep_dir: Path) -> bool:
    """Every cell the sweep recorded is finished and no launcher holds one (read by path, not by a walk)."""
    cells = sweep.read_cells(sweep_dir) if (sweep_dir / "cells.json").is_file() else []
    return bool(cells) and all(c.done and not cell_locks.lock_path(c.run_dir).exists() for c in cells)


def test_slurm_launcher_through_submitits_local_executor(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], sequential: dict) -> None:
    """Two of the three tasks (three cells, a job and a Python process each): their edges are the sequential sweep's."""
    pytest.importorskip("submitit")
    (tmp_path / "slurm.yaml").write_text("cluster: local\ntimeout_min: 10\n")
    config = _config(keyword_tasks, micro_encoder, tmp_path / "s", launcher="slurm",
                     slurm_config=str(tmp_path / "slurm.yaml"), tasks=THREE[:2])
    lines: list[str] = []
    sweep_dir, nothing = pairwise(config, echo=lines.append)
    assert nothing is None and any(line.startswith("submitted 3 cell job(s)") for line in lines), lines
    deadline = time.time() + 300  # the jobs run on their own; pairwise returned after submitting
    while time.time() < deadline and not _all_done(sweep_dir):  # the sweep's own record, never a walk of a
        time.sleep(1)                                              # tree the jobs are changing
    lines.clear()
    _, relations = pairwise(config, echo=lines.append)  # nothing left to submit: the relation files are written
    assert not any(line.startswith("submitted") for line in lines)
    between = {pair: delta for pair, delta in _edges(sequential).items() if set(pair) <= set(THREE[:2])}
    assert len(between) == 2 and relations is not None and _edges(relations) == pytest.approx(between, abs=1e-6)
    assert len(list((sweep_dir / "slurm").glob("*_log.out"))) == 3  # submitit's job logs beside the cells


def test_sbatch_parameters_come_from_the_yaml_file_and_the_flags(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("submitit")
    from mtbio.experiments.launchers import make_executor

    (tmp_path / "bin").mkdir()  # submitit's SLURM executor looks for srun; nothing is submitted here
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    (tmp_path / "slurm.yaml").write_text("cluster: slurm\nslurm_partition: short\ntimeout_min: 30\n"
                                         "slurm_additional_parameters: {constraint: a100}\n")
    config = StudyConfig(launcher="slurm", slurm_config=str(tmp_path / "slurm.yaml"), slurm_partition="gpu",
                       slurm_time=90, slurm_account="lab42", cell_gpus=1, cell_cpus=8)
    executor = make_executor(config, tmp_path / "jobs")
    text = executor._executor._make_submission_file_text("python -u -m submitit.core._submit jobs", "uid")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --account=lab42",
                 "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=8", "#SBATCH --constraint=a100",
                 "#SBATCH --job-name=mtbio-cell"):
        assert line in text, text
    (tmp_path / "bad.yaml").write_text("cluster: slurm\nslurm_no_such_thing: 1\n")
    with pytest.raises(MtbioError, match="submitit parameters: Unknown argument 'no_such_thing'"):
        make_executor(config.model_copy(update={"launcher": {**config.launcher, "config": str(tmp_path / "bad.yaml")}}),
                      tmp_path / "jobs")


def test_launcher_options_that_do_not_fit_are_refused(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    for extra, message in ((["--launcher", "ray", "--parallel", "2"], "--parallel is not an option of --launcher ray"),
                           (["--launcher", "ray", "--cell-gpus", "2"], "a cell on several GPUs is not supported")):
        result = CliRunner().invoke(main, _cli(keyword_tasks, micro_encoder, tmp_path / "s", *extra)[3:])
        assert result.exit_code == 2 and message in result.output, result.output
    result = CliRunner().invoke(main, _cli(keyword_tasks, micro_encoder, tmp_path / "s", "--parallel", "0")[3:])
    assert result.exit_code == 2 and "--parallel must be at least 1 (or auto)" in result.output, result.output


def test_parallel_auto_takes_a_process_per_gpu_else_a_single_thread_process_per_core() -> None:
    from mtbio.experiments.layout import Layout, local_layout

    assert local_layout("auto", 10, gpus=[], cores=2) == Layout(2, 1)
    assert local_layout("auto", 30, gpus=[], cores=16) == Layout(16, 1)
    assert local_layout("auto", 6, gpus=[], cores=16) == Layout(6, 2)  # no more processes than cells left
    assert local_layout("auto", 1, gpus=[], cores=2) == Layout(1, 2)  # one cell left: it gets every core
    assert local_layout("auto", 10, gpus=["0", "3"], cores=16) == Layout(2, 8, ("0", "3"))
    assert local_layout(3, 10, gpus=[], cores=2) == Layout(3, 1)  # explicit: as asked, even past the cores
    assert local_layout(1, 10, gpus=["0"], cores=8) == Layout(1, 8)
    assert StudyConfig(parallel="auto").launcher_spec()[1].parallel == "auto"
    assert StudyConfig(parallel=2).launcher == {"name": "local", "parallel": 2}
    assert Layout(2, 1).describe() == "2 processes, 1 CPU thread(s) each"



def test_cells_json_survives_a_move_and_older_sweeps_are_read_from_disk(tmp_path: Path) -> None:
    from mtbio.experiments.sweep import Cell, read_cells, record_cells

    sweep = tmp_path / "sweep"
    base = Cell("baseline", ("a",), 42, sweep / "baselines" / "a" / "seed-42", "single-task", 1e-4)
    pair = Cell("pair", ("a", "b"), 42, sweep / "pairs" / "a+b" / "seed-42", "refine", 1e-4)
    transfer = Cell("transfer", ("b",), 42, sweep / "transfer" / "a-to-b" / "seed-42", "finetune", 1e-5, base.run_dir)
    record_cells(sweep, [base, pair, transfer])
    assert "seed-42" in (sweep / "cells.json").read_text() and str(tmp_path) not in (sweep / "cells.json").read_text()
    moved = tmp_path / "elsewhere"
    sweep.rename(moved)  # a clone on another machine
    cells = read_cells(moved)
    assert [c.run_dir for c in cells] == [moved / "baselines/a/seed-42", moved / "pairs/a+b/seed-42",
                                          moved / "transfer/a-to-b/seed-42"]
    assert cells[2].from_cell == moved / "baselines/a/seed-42"
    (moved / "cells.json").unlink()  # a sweep from before cells.json: its cell directories are the list
    for cell in cells:
        (moved / cell.run_dir.relative_to(moved)).mkdir(parents=True, exist_ok=True)
    found = read_cells(moved)
    assert [(c.kind, c.tasks, c.seed) for c in found] == [("baseline", ("a",), 42), ("pair", ("a", "b"), 42),
                                                         ("transfer", ("b",), 42)]
    assert found[2].from_cell == moved / "baselines/a/seed-42"
    with pytest.raises(MtbioError, match="no cells.json and no cell directories"):
        read_cells(tmp_path / "empty")
