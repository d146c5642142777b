"""`mtbio tasks list` and `mtbio tasks check`, through CliRunner and as a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from mtbio.cli import main
from mtbio.tasks.loading import BUILTIN_TASK_DEFS

COLUMNS = ["task", "type", "category", "domain", "labels", "train", "dev", "test", "status"]


def _rows(output: str) -> dict[str, list[str]]:
    lines = output.splitlines()
    assert lines[0].split() == COLUMNS
    return {line.split()[0]: line.split(maxsplit=8) for line in lines[1:]}


def test_list_with_fixture_data(fixtures_dir: Path):
    result = CliRunner().invoke(main, ["tasks", "list", "--data-dir", str(fixtures_dir / "data")])
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert len(rows) == 29
    assert rows["hoc"][:9] == ["hoc", "multilabel", "document", "biomedical", "10", "3", "1", "2", "ok"]
    assert rows["biosses"][4] == "-"  # regression: no label vocabulary
    assert rows["ebm-pico"][5:8] == ["-", "2", "1"]  # no train split in the sources: what to do instead
    assert rows["ebm-pico"][8].startswith(f"missing EBM-NLP/train.tsv under {fixtures_dir / 'data'} — "
                                          "EBM-NLP/train.tsv is not downloadable as is: ")
    assert f"git hash-object {fixtures_dir / 'data'}/EBM-NLP/train.tsv` prints 34eeec3b" in rows["ebm-pico"][8]


def test_list_domain_without_data_marks_credentialed_sets(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MTBIO_DATA_DIR", str(tmp_path))  # fallback when --data-dir is not given
    result = CliRunner().invoke(main, ["tasks", "list", "--domain", "clinical"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert list(rows) == ["clinicalsts", "i2b2-2010", "mednli", "shareclefe"]
    status = rows["mednli"][8]
    assert status.startswith(f"missing (credentialed) — put files at {tmp_path}/MedNLI/mli_train_v1.jsonl")
    assert "physionet.org" in status


def test_list_unknown_domain_is_one_error_line():
    result = CliRunner().invoke(main, ["tasks", "list", "--domain", "nope"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: unknown domain 'nope'")


def test_missing_data_dir_is_one_error_line():
    result = CliRunner().invoke(main, ["tasks", "list", "--data-dir", "/no/such/dir"])
    assert result.exit_code == 2 and result.stderr == "error: data directory not found: /no/such/dir\n"


def test_check_ok(fixtures_dir: Path):
    result = CliRunner().invoke(main, ["tasks", "check", str(BUILTIN_TASK_DEFS / "mednli.yml"),
                                       "--data-dir", str(fixtures_dir / "data")])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ok: mednli (classification, format jsonl): train 3, dev 2, test 2"


def test_check_schema_problems_one_line_each(fixtures_dir: Path):
    path = fixtures_dir / "broken_defs" / "two_problems.yml"
    result = CliRunner().invoke(main, ["tasks", "check", str(path)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"error: {path}: task 'broken-task': field '") for line in lines)
    assert {line.split("field '")[1].split("'")[0] for line in lines} == {"lables", "max_length"}
    assert result.stdout == ""


def test_check_data_problems_one_line_each(fixtures_dir: Path):
    defs = fixtures_dir / "broken_defs"
    result = CliRunner().invoke(main, ["tasks", "check", str(defs / "bad_data.yml"), "--data-dir", str(defs)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert "field 'files.test': missing — put files at" in lines[0] and lines[0].endswith("bad_data/test.tsv")
    assert lines[1].endswith("bad_data/train.tsv:3: label 'maybe' is not among the labels of task 'bad-data': pos, neg")


def test_check_without_data_dir_validates_schema_only(monkeypatch):
    monkeypatch.delenv("MTBIO_DATA_DIR", raising=False)
    result = CliRunner().invoke(main, ["tasks", "check", str(BUILTIN_TASK_DEFS / "ddi.yml")])
    assert result.exit_code == 0
    assert "data not checked" in result.stdout


def test_subprocess_list_and_check(fixtures_dir: Path):
    env = {**os.environ, "MTBIO_DATA_DIR": str(fixtures_dir / "data")}
    listed = subprocess.run([sys.executable, "-m", "mtbio", "tasks", "list", "--domain", "clinical-public"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert list(_rows(listed.stdout)) == ["nli4ct", "mqp", "ade", "chia"]
    broken = subprocess.run([sys.executable, "-m", "mtbio", "tasks", "check",
                             str(fixtures_dir / "broken_defs" / "two_problems.yml")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert broken.returncode == 1
    assert len(broken.stderr.strip().splitlines()) == 2 and "Traceback" not in broken.stderr


def test_checking_definitions_and_their_data_imports_neither_torch_nor_datasets(fixtures_dir: Path) -> None:
    """A kind's declaration is torch-free (its head is imported when a run builds one), so `mtbio tasks check` of
    every shipped definition, with its data read, loads neither library."""
    script = ("import sys\nfrom mtbio.cli import main\n"
              f"for path in {[str(p) for p in sorted(BUILTIN_TASK_DEFS.glob('*.yml'))]!r}:\n"
              f"    try:\n        main(['tasks', 'check', path, '--data-dir', {str(fixtures_dir / 'data')!r}])\n"
              "    except SystemExit:\n        pass\n"
              "print('loaded:', sorted(m for m in ('torch', 'datasets') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.count("ok: ") >= 15 and done.stdout.splitlines()[-1] == "loaded: []", done.stdout[-2000:]
