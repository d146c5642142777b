"""A study's finished cells kept in one file (cells.jsonl) in place of their directories: `mtbio sweep pack`
writes it, and reports read a cell from it once the cell's directory is gone."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.run_dir import SweepDir, saved_cell

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("study", ["pairwise_clinical_public", "pairwise_biomedical"])
def test_a_committed_sweep_is_rebuilt_from_its_one_file(study: str, tmp_path: Path) -> None:
    """The committed sweep keeps its cells in cells.jsonl alone; `mtbio report` rebuilds relations.json from them,
    identical to the committed one."""
    copy = tmp_path / study
    shutil.copytree(EXAMPLES / study, copy)
    assert not (copy / "pairs").exists() and not (copy / "baselines").exists()
    committed = json.loads((copy / "relations.json").read_text())
    (copy / "relations.json").write_text(json.dumps({**committed, "edges": []}))  # stale: only its rule is read
    shown = CliRunner().invoke(main, ["report", str(copy)])
    assert shown.exit_code == 0, shown.output
    assert f"written: {copy / 'relations.json'}" in shown.output
    assert json.loads((copy / "relations.json").read_text()) == committed


def _run(path: Path, dev: float, config: str = "seed: 1\n", weights: bool = False) -> None:
    (path / "tasks").mkdir(parents=True)
    (path / "config.yaml").write_text(config)
    (path / "tasks" / "a.yml").write_text("name: a\nmetric: accuracy\n")
    (path / "metrics.jsonl").write_text('{"step": 1}\n')
    (path / "run.log").write_text("a log line\n")
    if weights:
        (path / "encoder").mkdir()
        (path / "encoder" / "model.safetensors").write_bytes(b"\0weights")
    (path / "results.json").write_text(json.dumps({"dev": {"a": {"accuracy": dev}}, "wall_seconds": 2.0}))


def test_sweep_pack_keeps_finished_cells_and_a_directory_stays_the_truth(tmp_path: Path) -> None:
    study = tmp_path / "study"
    _run(study / "baselines" / "a" / "seed-1", 0.5)
    _run(study / "pairs" / "a+b" / "seed-1", 0.7, weights=True)  # weights kept: its directory stays
    (study / "pairs" / "a+b" / "seed-2").mkdir(parents=True)  # still training: not a cell yet
    _run(study / "pairs" / "a+c" / "seed-1", 0.6)
    (study / "pairs" / "a+c" / "seed-1" / "curves.png").write_bytes(b"\x89PNG\xff")  # not text: its folder stays

    packed = CliRunner().invoke(main, ["sweep", "pack", str(study), "--remove"])
    assert packed.exit_code == 0, packed.output
    assert f"written: {study / 'cells.jsonl'} (3 cells)" in packed.output and "removed 1 cell directories" in packed.output
    assert not (study / "baselines").exists() and (study / "pairs" / "a+b" / "seed-1" / "encoder").is_dir()
    assert (study / "pairs" / "a+c" / "seed-1" / "curves.png").is_file()
    lines = [json.loads(line) for line in (study / "cells.jsonl").read_text().splitlines()]
    assert [line["cell"] for line in lines] == ["baselines/a/seed-1", "pairs/a+b/seed-1", "pairs/a+c/seed-1"]
    assert lines[0]["results"]["dev"] == {"a": {"accuracy": 0.5}}
    assert set(lines[0]["files"]) == {"config.yaml", "metrics.jsonl", "tasks/a.yml"}  # no log, no weights
    assert lines[0]["config_sha256"] == hashlib.sha256(b"seed: 1\n").hexdigest()

    gone = saved_cell(study / "baselines" / "a" / "seed-1")
    assert gone is not None and gone.results()["dev"]["a"]["accuracy"] == 0.5 and gone.config() == {"seed": 1}
    assert [run.results()["dev"]["a"]["accuracy"] for run in SweepDir(study).cell_runs(("baselines", "pairs"))] \
        == [0.5, 0.7, 0.6]

    (study / "baselines" / "a" / "seed-1").mkdir(parents=True)  # trained again: the directory is read, unfinished
    assert saved_cell(study / "baselines" / "a" / "seed-1") is None
    again = CliRunner().invoke(main, ["sweep", "pack", str(study)])
    assert again.exit_code == 0 and "(2 cells)" in again.output
    assert [json.loads(line)["cell"] for line in (study / "cells.jsonl").read_text().splitlines()] == \
        ["pairs/a+b/seed-1", "pairs/a+c/seed-1"]


def test_a_committed_runs_table_is_rebuilt_from_its_one_file(data_dir: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/mtbert_biomedical keeps its runs in cells.jsonl; the script's `mtbio report` command rebuilds the
    committed dev table from there."""
    study = EXAMPLES / "mtbert_biomedical"
    assert not (study / "single-task").exists() and not (study / "mt-fine-tune").exists()
    monkeypatch.chdir(EXAMPLES.parent)
    shown = CliRunner().invoke(main, [
        "report", "examples/mtbert_biomedical/single-task", "examples/mtbert_biomedical/refine",
        "examples/mtbert_biomedical/mt-fine-tune", "--label", "single-task", "--label", "mt-refinement",
        "--label", "mt-fine-tune", "--split", "dev", "--trivial", "--data-dir", str(data_dir),
        "--compare-to", "single-task", "--output", str(tmp_path / "table-dev.md")])
    assert shown.exit_code == 0, shown.output
    assert (tmp_path / "table-dev.md").read_text() == (study / "table-dev.md").read_text()
    gone = CliRunner().invoke(main, ["report", "examples/mtbert_biomedical/no-such-row"])
    assert gone.exit_code == 2 and "Directory 'examples/mtbert_biomedical/no-such-row' does not exist" in gone.output
