"""`mtbio data get` against a loopback server serving copies of the real data under their sources' URL paths
(tests/source_server.py): every public task into an empty directory, then listed and trained; a corrupted byte, a
kill mid-download, a full disk and no network each end in one line and leave no partial file."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from source_server import serve, source_files, url_path

from mtbio.cli import main

MTBIO = [sys.executable, "-m", "mtbio"]
FETCHED = sorted({f.dest for f in source_files()})


def _env(base_url: str) -> dict[str, str]:
    return dict(os.environ, MTBIO_DATA_BASE_URL=base_url, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def _table(output: str) -> dict[str, list[str]]:
    lines = output.strip().splitlines()
    return {line.split()[0]: line.split(maxsplit=8) for line in lines[1:]}


@pytest.fixture(scope="module")
def fetched(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """`mtbio data get --all` into an empty directory, as a process."""
    target = tmp_path_factory.mktemp("fetched") / "data"
    with serve(data_dir) as server:
        done = subprocess.run([*MTBIO, "data", "get", "--all", "--data-dir", str(target)], env=_env(server.base_url),
                              capture_output=True, text=True, timeout=300)
    return target, done


def test_data_get_all_fetches_every_public_file_verified(fetched: tuple[Path, subprocess.CompletedProcess],
                                                         data_dir: Path) -> None:
    target, done = fetched
    assert f"data get: {len(FETCHED)} files fetched" in done.stdout, done.stdout + done.stderr
    assert _files(target) == FETCHED  # nothing else: no temporary files, no archive left behind
    assert all((target / name).read_bytes() == (data_dir / name).read_bytes() for name in FETCHED)
    # never a silent partial set: EBM-NLP's train split and the tasks without a source are named, status 1
    assert done.returncode == 1
    errors = done.stderr.splitlines()
    ebm = next(line for line in errors if line.startswith("EBM-NLP/train.tsv (ebm-pico) is not downloadable as is"))
    assert f"curl -L -o {target}/EBM-NLP/train.tsv https://raw.githubusercontent.com/hieunguyen7337/KeBioLM/" in ebm
    assert any(line.startswith("task 'gad': no recorded source: public: Microsoft's BLURB") for line in errors)
    assert not any("mednli" in line for line in errors)  # --all: the public tasks only
    assert errors[-1] == "not complete: 1 file(s) need the manual step above, 4 task(s) have no downloadable source"


def test_fetched_directory_lists_and_trains_like_the_real_one(fetched: tuple[Path, subprocess.CompletedProcess],
                                                              data_dir: Path, tiny_encoder: str,
                                                              tmp_path: Path) -> None:
    target, _ = fetched
    theirs = CliRunner().invoke(main, ["tasks", "list", "--data-dir", str(data_dir)])
    ours = CliRunner().invoke(main, ["tasks", "list", "--data-dir", str(target)])
    assert ours.exit_code == 0, ours.output
    real, got = _table(theirs.stdout), _table(ours.stdout)
    public = [name for name, row in real.items() if row[5:8] != ["-", "-", "-"]]
    assert len(public) == 21  # every public task with data (the -mnrl variants included): split sizes as in the real directory
    assert all(got[name][:8] == real[name][:8] for name in public), [n for n in public if got[n][:8] != real[n][:8]]
    out = tmp_path / "tuned"
    done = CliRunner().invoke(main, ["finetune", "--task", "chemprot", "--data-dir", str(target), "--encoder",
                                     tiny_encoder, "--max-train-examples", "20", "--max-steps", "2",
                                     "--max-eval-examples", "20", "--max-length", "32", "--output", str(out)])
    assert done.exit_code == 0, done.output
    assert "micro_f1" in json.loads((out / "chemprot" / "results.json").read_text())["dev"]["chemprot"]


def test_a_corrupted_byte_is_refused_and_nothing_is_left(data_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    dev = next(f for f in source_files() if f.dest == "ChemProt/dev.txt")
    with serve(data_dir) as server:
        server.corrupt.add(url_path(dev))
        monkeypatch.setenv("MTBIO_DATA_BASE_URL", server.base_url)
        done = CliRunner().invoke(main, ["-q", "data", "get", "chemprot", "--data-dir", str(tmp_path)])
    assert done.exit_code == 2
    url = f"{server.base_url}{url_path(dev)}"
    assert done.output.splitlines()[-1] == (
        f"error: ChemProt/dev.txt: the bytes from {url} are not the recorded file (sha256 "
        f"{hashlib.sha256(server.body(url_path(dev))).hexdigest()}, 678,657 bytes): refused, nothing written; by hand: "
        f"download {url} to {tmp_path}/ChemProt/dev.txt (sha256 {dev.sha256}, 678,657 bytes)")
    assert "ChemProt/dev.txt" not in _files(tmp_path) and not [n for n in _files(tmp_path) if ".part" in n]


def test_a_download_killed_halfway_resumes_to_identical_files(data_dir: Path, tmp_path: Path) -> None:
    train = next(f for f in source_files() if f.dest == "DDI/train.tsv")
    part = tmp_path / "DDI" / ".train.tsv.part"
    with serve(data_dir) as server:
        server.stall_after[url_path(train)] = train.size // 2
        child = subprocess.Popen([*MTBIO, "-q", "data", "get", "ddi", "--data-dir", str(tmp_path)],
                                 env=_env(server.base_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not (part.is_file() and part.stat().st_size == train.size // 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert not (tmp_path / "DDI" / "train.tsv").exists() and part.stat().st_size == train.size // 2
        server.stall_after.clear()
        server.requests.clear()
        done = subprocess.run([*MTBIO, "data", "get", "ddi", "--data-dir", str(tmp_path)], env=_env(server.base_url),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert (url_path(train), f"bytes={train.size // 2}-") in server.requests  # resumed, not started again
        assert _files(tmp_path) == ["DDI/dev.tsv", "DDI/test.tsv", "DDI/train.tsv"]
        assert all(_sha256(tmp_path / n) == _sha256(data_dir / n) for n in _files(tmp_path))
        server.requests.clear()
        again = CliRunner().invoke(main, ["data", "get", "ddi", "--data-dir", str(tmp_path)],
                                   env={"MTBIO_DATA_BASE_URL": server.base_url})
    assert again.exit_code == 0 and server.requests == []  # a rerun checks hashes and fetches nothing
    assert "data get: 0 files fetched (0.0 MB), 3 already in place" in again.output


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 1 MiB tmpfs where mounting one is allowed (root), else a directory whose file syncs fail with ENOSPC."""
    mount = tmp_path / "small"
    mount.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                                 capture_output=True).returncode == 0
    except OSError:  # no mount command
        mounted = False
    if not mounted:
        def no_space(_fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr("mtbio.data.fetch.os.fsync", no_space)
    yield mount
    if mounted:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_one_line_and_nothing_partial(data_dir: Path, full_disk: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with serve(data_dir) as server:
        monkeypatch.setenv("MTBIO_DATA_BASE_URL", server.base_url)
        done = CliRunner().invoke(main, ["data", "get", "chemprot", "--data-dir", str(full_disk)])
    assert done.exit_code == 2
    errors = [line for line in done.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: cannot write {full_disk}/ChemProt/")
    assert errors[0].endswith(": the disk is full; nothing partial is left; free space and rerun")
    left = _files(full_disk)  # only whole, verified files (ChemProt's three do not fit in 1 MiB together)
    assert len(left) < 3 and not [n for n in left if ".part" in n]
    assert all(_sha256(full_disk / n) == _sha256(data_dir / n) for n in left)


def test_offline_is_one_line_naming_the_file_url_and_manual_route(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["-q", "data", "get", "mqp", "--data-dir", str(tmp_path)],
                              env={"MTBIO_DATA_BASE_URL": "http://127.0.0.1:9"})  # the discard port: refused
    assert done.exit_code == 2
    url = "http://127.0.0.1:9/curai/medical-question-pair-dataset/6c7f7fd7a53cedc6fec105c0c6cb78f2e9a82cd1/mqp.csv"
    assert done.output.splitlines() == [
        f"error: MedicalQuestionPairs/mqp.csv: cannot download {url} ([Errno 111] Connection refused); by hand: "
        f"download {url} to {tmp_path}/MedicalQuestionPairs/mqp.csv (sha256 "
        f"{next(f.sha256 for f in source_files() if f.dest.endswith('mqp.csv'))}, 665,688 bytes)"]
    assert _files(tmp_path) == []


def test_dry_run_lists_urls_sizes_and_destinations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MTBIO_DATA_BASE_URL", raising=False)
    done = CliRunner().invoke(main, ["data", "get", "chemprot", "nli4ct", "mednli", "--dry-run", "--data-dir",
                                     str(tmp_path / "data")])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == ("https://raw.githubusercontent.com/allenai/scibert/06793f77d7278898159ed50da30d173cdc8fdea9/"
                        f"data/text_classification/chemprot/train.txt  1,121,208 bytes  -> {tmp_path}/data/ChemProt/"
                        "train.txt")
    assert ("https://raw.githubusercontent.com/ai-systems/nli4ct/8e8e5fc506b916984011873403b9ea5ed6dd96c2/"
            "Complete_dataset.zip [Complete_dataset/train.json]  1,020,261 bytes  -> "
            f"{tmp_path}/data/NLI4CT/train.json") in lines
    assert len([line for line in lines if "Complete_dataset.zip [" in line]) == 1002  # 3 splits + 999 trial reports
    assert lines[-1].startswith("task 'mednli': credentialed, not downloadable: credentialed PhysioNet access")
    assert not (tmp_path / "data").exists()


def test_missing_data_names_the_route_before_anything_else(tmp_path: Path, tiny_encoder: str) -> None:
    done = CliRunner().invoke(main, ["finetune", "--task", "chemprot", "--data-dir", str(tmp_path), "--encoder",
                                     tiny_encoder, "--output", str(tmp_path / "run")])
    assert done.exit_code == 2
    assert done.output.splitlines() == [
        f"error: task 'chemprot': missing ChemProt/train.txt, ChemProt/dev.txt, ChemProt/test.txt under {tmp_path} — "
        f"`mtbio data get chemprot --data-dir {tmp_path}` fetches them (allenai/scibert @ 06793f7)"]


def test_a_folder_is_never_left_partial(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = next(f for f in source_files() if f.dest.startswith("Chia/chia_without_scope/"))
    with serve(data_dir) as server:
        server.corrupt.add(url_path(first))
        monkeypatch.setenv("MTBIO_DATA_BASE_URL", server.base_url)
        done = CliRunner().invoke(main, ["-q", "data", "get", "chia", "--data-dir", str(tmp_path)])
    assert done.exit_code == 2 and f"error: {first.dest}: the bytes from" in done.output
    assert not (tmp_path / "Chia" / "chia_without_scope").exists()  # only its temporary name, not read as the corpus
    listed = _table(CliRunner().invoke(main, ["tasks", "list", "--data-dir", str(tmp_path)]).stdout)
    assert listed["chia"][8] == (f"missing Chia/chia_without_scope under {tmp_path} — `mtbio data get chia "
                                 f"--data-dir {tmp_path}` fetches it (Vidhate/CHIA-NER-RE @ ed84384)")
