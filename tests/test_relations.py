"""mtbio pairwise / mtbio stilt: verdict rule, a synthetic setup with a known helper and a noise task,
resuming a killed sweep, shared baselines, the dry-run estimate, and missing credentialed data."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import mtbio.experiments.sweep as sweep
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.pairwise import pairwise
from mtbio.experiments.stilt import stilt
from mtbio.experiments.study_config import StudyConfig
from mtbio.reporting.relations import report_relations
from mtbio.reporting.verdicts import HURTS, IMPROVES, NO_EFFECT, judge

def _config(keyword_tasks: tuple[str, str], encoder: str, output: Path, **overrides: object) -> StudyConfig:
    defs, data = keyword_tasks
    values = dict(tasks=["kw-few", "kw-all", "kw-noise"], task_defs=[defs], data_dir=data, encoder=encoder,
                  output=str(output), epochs=4, batch_size=8, lr=5e-3, seeds=3)
    values.update(overrides)
    return StudyConfig(**values)


# ---- the verdict rule ------------------------------------------------------------------------------
def test_consistent_gain_improves_and_noisy_gain_has_no_effect() -> None:
    assert judge([0.05, 0.06, 0.055], alpha=0.05, min_delta=0.01).verdict == IMPROVES
    assert judge([-0.05, -0.06, -0.055], alpha=0.05, min_delta=0.01).verdict == HURTS
    noisy = judge([0.08, -0.05, 0.04], alpha=0.05, min_delta=0.01)  # mean +0.023, but within the spread
    assert noisy.verdict == NO_EFFECT and noisy.p_value is not None and noisy.p_value > 0.05
    assert judge([0.004, 0.005, 0.0045], alpha=0.05, min_delta=0.01).verdict == NO_EFFECT  # significant but tiny
    assert judge([0.05], alpha=0.05, min_delta=0.01).verdict == IMPROVES  # one seed: the threshold alone
    assert judge([0.005], alpha=0.05, min_delta=0.01).verdict == NO_EFFECT
    assert judge([0.3, 0.3], alpha=0.05, min_delta=0.0).p_value == 0.0  # identical gains: no spread at all


# ---- pairwise end to end -------------------------------------------------------------------------
def test_helper_task_gets_a_green_edge_and_the_noise_task_none(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    sweep_dir, relations = pairwise(_config(keyword_tasks, micro_encoder, tmp_path / "sweep"), echo=lambda _: None)
    assert relations is not None
    edges = {(e["source"], e["target"]): e for e in relations["edges"]}
    assert len(edges) == 6 and all(e["n_seeds"] == 3 for e in edges.values())
    helped = edges[("kw-all", "kw-few")]
    assert helped["verdict"] == IMPROVES and helped["delta"] > 0.2, helped
    assert [e for (s, _), e in edges.items() if s == "kw-noise" and e["verdict"] == IMPROVES] == []
    assert set(helped["per_seed"]) == {"42", "43", "44"}

    for name in ("relations.json", "relations.dot", "relations.graphml", "gain_matrix.csv", "relations.png",
                 "gain_matrix.png"):
        assert (sweep_dir / name).is_file(), name
    for png in ("relations.png", "gain_matrix.png"):
        import matplotlib.image

        image = matplotlib.image.imread(sweep_dir / png)
        assert image.shape[0] > 200 and image.shape[1] > 200 and image.std() > 0.01  # a real picture, not blank
    dot = (sweep_dir / "relations.dot").read_text()
    assert '"kw-all" -> "kw-few" [color="#2e7d32"' in dot
    import networkx as nx

    graph = nx.read_graphml(sweep_dir / "relations.graphml")
    assert graph.edges["kw-all", "kw-few"]["verdict"] == IMPROVES
    csv_lines = (sweep_dir / "gain_matrix.csv").read_text().splitlines()
    assert csv_lines[0] == "target \\ partner,kw-few,kw-all,kw-noise"
    assert csv_lines[1].startswith("kw-few,,") and float(csv_lines[1].split(",")[2]) == pytest.approx(helped["delta"], abs=1e-5)

    text = report_relations(sweep_dir)
    assert "kw-few: kw-all (+" in text and "improves" in text
    result = CliRunner().invoke(main, ["report", str(sweep_dir)])
    assert result.exit_code == 0 and "most helpful partner" in result.output


# ---- resuming, sharing, dry run ---------------------------------------------------------------------
class _Killed(KeyboardInterrupt):
    """Stops the sweep the way a signal does (an ordinary exception is a failed cell, recorded and retried)."""


_REAL_TRAIN = sweep.train_tasks


def _counting(monkeypatch: pytest.MonkeyPatch, kill_after: int | None = None) -> list[Path]:
    """Count train_tasks calls; on call kill_after+1 leave a half-written run directory and stop."""
    real = _REAL_TRAIN
    calls: list[Path] = []

    def train(tasks, config, run_dir, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(run_dir)
        if kill_after is not None and len(calls) > kill_after:
            run_dir.mkdir(parents=True)
            (run_dir / "config.yaml").write_text("half-written\n")
            raise _Killed()
        return real(tasks, config, run_dir, *args, **kwargs)

    monkeypatch.setattr(sweep, "train_tasks", train)
    return calls


def test_killed_sweep_resumes_without_redoing_finished_cells(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(keyword_tasks, micro_encoder, tmp_path / "sweep", tasks=["kw-few", "kw-all"], seeds=2, epochs=1)
    calls = _counting(monkeypatch, kill_after=3)
    with pytest.raises(_Killed):
        pairwise(config, echo=lambda _: None)
    finished = sorted((tmp_path / "sweep").rglob("results.json"))
    assert len(finished) == 3
    stamps = {p: p.stat().st_mtime_ns for p in finished}
    unfinished = calls[-1]
    assert not (unfinished / "results.json").exists()

    lines: list[str] = []
    dry_sweep_dir, nothing = pairwise(config.model_copy(update={"dry_run": True}), echo=lines.append)
    assert nothing is None and "6 cells, 3 finished, 3 to run" in lines[0]
    assert "measured on 3 finished cell(s)" in lines[-1]

    calls = _counting(monkeypatch)
    _, relations = pairwise(config, echo=lambda _: None)
    assert len(calls) == 3 and unfinished in calls  # the killed cell is redone, the finished ones are not
    assert {p: p.stat().st_mtime_ns for p in finished} == stamps
    assert (unfinished / "results.json").is_file() and not (unfinished / "checkpoints").exists()
    assert relations is not None and len(relations["edges"]) == 2

    calls = _counting(monkeypatch)
    pairwise(config, echo=lambda _: None)  # everything finished: nothing trains, the files are rewritten
    assert calls == []
    written = json.loads((tmp_path / "sweep" / "relations.json").read_text())
    packed = [json.loads(line) for line in (tmp_path / "sweep" / "cells.jsonl").read_text().splitlines()]
    assert [c["cell"] for c in packed] == sorted(str(p.parent.relative_to(tmp_path / "sweep"))
                                                 for p in (tmp_path / "sweep").rglob("results.json"))
    assert len(packed) == 6 and all(c["results"]["dev"] and "config.yaml" in c["files"] for c in packed)
    (tmp_path / "sweep" / "relations.json").unlink()  # `mtbio report` rebuilds the files from the finished cells
    shown = CliRunner().invoke(main, ["report", str(tmp_path / "sweep")])
    assert shown.exit_code == 0, shown.output
    rebuilt = json.loads((tmp_path / "sweep" / "relations.json").read_text())
    assert sorted(json.dumps(e, sort_keys=True) for e in rebuilt["edges"]) == \
        sorted(json.dumps(e, sort_keys=True) for e in written["edges"])

    # STILT in the same directory reuses the single-task baselines' scores; pairwise dropped their weights
    # (--keep-weights none), so the intermediate is trained again for its encoder before each transfer
    assert not list((tmp_path / "sweep").rglob("*.safetensors"))
    _, result = stilt(config.model_copy(update={"tasks": [], "intermediate": ["kw-all"], "target": ["kw-few"]}),
                      echo=lambda _: None)
    assert [p.relative_to(tmp_path / "sweep").as_posix() for p in calls] == [
        "baselines/kw-all/seed-42", "transfer/kw-all-to-kw-few/seed-42",
        "baselines/kw-all/seed-43", "transfer/kw-all-to-kw-few/seed-43"]
    assert not list((tmp_path / "sweep").rglob("*.safetensors"))  # dropped once their targets finished
    assert result is not None and (tmp_path / "sweep" / "stilt_matrix.png").is_file()
    saved = json.loads((tmp_path / "sweep" / "transfer/kw-all-to-kw-few/seed-42/results.json").read_text())
    assert saved["stage"] == "finetune"
    assert saved["encoder_source"] == str(tmp_path / "sweep" / "baselines/kw-all/seed-42/encoder")
    csv_lines = (tmp_path / "sweep" / "stilt_matrix.csv").read_text().splitlines()
    assert csv_lines[0] == "target \\ intermediate,baseline,kw-all"
    assert "STILT" in report_relations(tmp_path / "sweep")

    with pytest.raises(MtbioError, match="other options.*epochs"):
        pairwise(config.model_copy(update={"epochs": 2}), echo=lambda _: None)
    recorded = tmp_path / "sweep" / "sweep.json"  # recorded before mtbio had an option: it ran at the default
    older = json.loads(recorded.read_text())
    del older["protocol"]["packing"]
    recorded.write_text(json.dumps(older))
    pairwise(config, echo=lambda _: None)
    with pytest.raises(MtbioError, match="other options.*packing"):
        pairwise(config.model_copy(update={"packing": not config.packing}), echo=lambda _: None)

    # the cells folded into cells.jsonl and their folders gone (a committed study): a rerun trains nothing and
    # writes the same relations
    packed = CliRunner().invoke(main, ["sweep", "pack", str(tmp_path / "sweep"), "--remove"])
    assert packed.exit_code == 0 and "removed 8 cell directories" in packed.output, packed.output
    calls = _counting(monkeypatch)
    _, again = pairwise(config, echo=lambda _: None)
    assert calls == [] and not (tmp_path / "sweep" / "pairs").exists()
    assert again is not None and again["edges"] == relations["edges"]


def test_dry_run_lists_every_cell_with_a_default_estimate(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    result = CliRunner().invoke(main, ["pairwise", "--tasks", "kw-few,kw-all,kw-noise", "--task-defs", defs,
                                       "--data-dir", data, "--output", str(tmp_path / "s"), "--seeds", "2",
                                       "--epochs", "1", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "12 cells, 0 finished, 12 to run" in result.output
    assert "pair kw-few + kw-all, seed 43" in result.output and "baseline kw-noise, seed 42" in result.output
    assert "estimated time: ~" in result.output and "default rates" in result.output
    assert not (tmp_path / "s").exists()  # a dry run writes nothing
    refused = CliRunner().invoke(main, ["pairwise", "--tasks", "kw-few,kw-all", "--task-defs", defs, "--data-dir", data,
                                        "--resume"])
    assert refused.exit_code == 2 and "a sweep resumes by itself" in refused.output


# ---- data checks --------------------------------------------------------------------------------------
def test_clinical_without_credentialed_data_names_every_missing_task(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["pairwise", "--domain", "clinical", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 4
    for task in ("clinicalsts", "i2b2-2010", "mednli", "shareclefe"):
        assert any(f"task '{task}'" in line and "put files at" in line and str(tmp_path) in line for line in errors)


def test_public_clinical_substitutes_run(tmp_path: Path, tiny_encoder: str, data_dir: Path) -> None:
    for needed in ("MedicalQuestionPairs", "ADE-Corpus-V2"):
        if not (data_dir / needed).is_dir():
            pytest.skip(f"{needed} not in the data directory")
    result = CliRunner().invoke(main, ["pairwise", "--tasks", "mqp,ade", "--data-dir", str(data_dir), "--encoder",
                                       tiny_encoder, "--output", str(tmp_path / "s"), "--seeds", "1",
                                       "--max-steps", "2", "--batch-size", "4", "--max-train-examples", "16",
                                       "--max-length", "32"])
    assert result.exit_code == 0, result.output
    assert "most helpful partner" in result.output and (tmp_path / "s" / "relations.png").is_file()


def test_sweep_under_accelerate_launch_runs_each_cell_once(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    """Two CPU processes (gloo) walk the same cells; the main one prints, cleans and writes."""
    import os
    import shutil
    import socket
    import subprocess
    import sys

    launcher = Path(sys.executable).parent / "accelerate"
    if shutil.which("accelerate", path=str(launcher.parent)) is None:
        pytest.skip("the accelerate command is not installed beside this Python")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    defs, data = keyword_tasks
    repo = Path(__file__).resolve().parents[1]
    command = [str(launcher), "launch", "--config_file", str(repo / "examples" / "accelerate" / "ddp.yaml"),
               "--main_process_port", str(port), "-m", "mtbio", "pairwise", "--tasks", "kw-few,kw-all",
               "--task-defs", defs, "--data-dir", data, "--encoder", micro_encoder, "--output", str(tmp_path / "s"),
               "--seeds", "1", "--epochs", "1", "--batch-size", "8"]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stdout.count("[1/3] baseline kw-few, seed 42") == 1 and done.stdout.count("most helpful partner") == 1
    assert len(list((tmp_path / "s").rglob("results.json"))) == 3 and (tmp_path / "s" / "relations.json").is_file()


def test_the_time_estimate_counts_steps_as_the_trainer_does(tmp_path: Path) -> None:
    """Per-task rounding: 33 + 33 examples at batch 32 are 2 + 2 batches an epoch, not ceil(66 / 32) = 3."""
    from mtbio.experiments.sweep import Cell, cell_work
    from mtbio.training.trainer import TrainerOptions, build_sampler, run_length

    config = StudyConfig(batch_size=32, epochs=2, eval_test=True, recipe="mt-bert")  # no step floor
    sizes = {"a": {"train": 33, "dev": 10, "test": 5}, "b": {"train": 40, "dev": 7, "test": 1}}
    cell = Cell("pair", ("a", "b"), 42, tmp_path / "c", "refine", 5e-5)
    work = cell_work(cell, config.model_copy(update={"max_train_examples": 33}), sizes)
    options = TrainerOptions.of(config)
    steps_per_epoch, total = run_length(options, len(build_sampler(options, {"a": [1] * 33, "b": [1] * 33})))
    assert (steps_per_epoch, total) == (4, 8)
    floored = TrainerOptions.of(config.model_copy(update={"min_steps": 10}))  # the floor raises whole epochs' 8 to 10
    assert run_length(floored, len(build_sampler(floored, {"a": [1] * 33, "b": [1] * 33}))) == (4, 10)
    assert work.train_examples == 2 * 66 and work.eval_examples == 2 * (10 + 7) + (5 + 1)
    ratio = config.model_copy(update={"mixer": {"name": "ratio", "main_task": "a", "ratio": 2.0}})
    # 2 main-task batches (32 + 1) and 4 auxiliary ones, cycling over b's two (32 + 8), an epoch
    assert cell_work(cell, ratio, sizes).train_examples == 2 * (33 + 2 * (32 + 8))
