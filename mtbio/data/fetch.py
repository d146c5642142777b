"""`mtbio data get`: each public task's files downloaded from the sources the package records
(`mtbio/tasks/sources.json`), verified by sha256 before they are moved into place.

A file is written under a temporary name in its own folder (`.NAME.part`), fsynced and renamed onto its name, so a
kill or a full disk never leaves a torn data file; a rerun skips files whose hash already matches and resumes a
partial download where the server allows it (an HTTP range). A failed download or a wrong hash is one line naming
the file, the URL and how to fetch it by hand.
"""
from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

from tqdm import tqdm

from mtbio.errors import MtbioError
from mtbio.data.split_cache import file_sha256
from mtbio.fileio import make_dir, writing
from mtbio.logs import bars_enabled
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.sources import Archive, ManualFile, SourceFile, task_sources

# Tests only: a loopback server in place of GitHub's raw files (same paths: /OWNER/REPO/COMMIT/PATH).
BASE_URL_ENV = "MTBIO_DATA_BASE_URL"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
TIMEOUT_S = 60
CHUNK = 1 << 16
WORKERS = 8  # downloads at a time (Chia is 4,001 small files)


class FetchError(MtbioError):
    """A file could not be downloaded or did not have the recorded bytes; nothing was moved into place."""


@dataclass
class Plan:
    """What `data get` does for some tasks: the files to fetch, the manual steps, the tasks it cannot fetch."""

    files: list[SourceFile] = field(default_factory=list)
    manual: list[tuple[str, ManualFile]] = field(default_factory=list)     # (task, step)
    unavailable: list[tuple[str, str]] = field(default_factory=list)      # (task, why)
    folders: list[str] = field(default_factory=list)  # declared folders: filled under a temporary name, then renamed


@dataclass
class Outcome:
    """What a `data get` run did."""

    fetched: int = 0
    present: int = 0
    bytes: int = 0


def plan(tasks: list[TaskDef]) -> Plan:
    """Each task's recorded files (each once), its manual steps, and the tasks with no recorded source."""
    result, seen = Plan(), set()
    for task in tasks:
        sources = task_sources(task)
        if task.credentialed or not (sources.files or sources.manual):
            why = "credentialed, not downloadable" if task.credentialed else "no recorded source"
            result.unavailable.append((task.name, why + (f": {task.access}" if task.access else "")))
            continue
        result.files += [f for f in sources.files if f.dest not in seen]
        result.manual += [(task.name, m) for m in sources.manual if m.dest not in seen]
        seen |= {f.dest for f in sources.files} | {m.dest for m in sources.manual}
        result.folders += [d for d in sources.folders if d not in result.folders]
    return result


def url_of(repo: str, commit: str, path: str) -> str:
    """The raw file's URL at that commit (the base URL from MTBIO_DATA_BASE_URL in tests)."""
    base = os.environ.get(BASE_URL_ENV, DEFAULT_BASE_URL).rstrip("/")
    return f"{base}/{repo}/{commit}/{quote(path)}"


def file_url(entry: SourceFile) -> str:
    """Where the file's bytes are: its own URL, or its archive's."""
    return url_of(entry.repo, entry.commit, entry.archive.path if entry.archive else entry.path)


def by_hand(entry: SourceFile, data_dir: Path) -> str:
    """The manual route for one file."""
    member = f" and take {entry.path} from it" if entry.archive else ""
    return (f"by hand: download {file_url(entry)}{member} to {data_dir / entry.dest} "
            f"(sha256 {entry.sha256}, {entry.size:,} bytes)")


def in_place(entry: SourceFile, path: Path) -> bool:
    """Whether the file is already at `path` with the recorded bytes; FetchError when another file holds its name."""
    if not path.exists():
        return False
    if path.is_file() and path.stat().st_size == entry.size and file_sha256(path) == entry.sha256:
        return True
    raise FetchError(f"{entry.dest}: {path} is already there but is not the recorded file (sha256 {entry.sha256}, "
                     f"{entry.size:,} bytes); move it away and rerun")


def dry_run(data_plan: Plan, data_dir: Path) -> list[str]:
    """A line per file: URL, size, destination, and whether it is already in place."""
    lines = []
    for entry in data_plan.files:
        member = f" [{entry.path}]" if entry.archive else ""
        state = "  (in place)" if in_place(entry, data_dir / entry.dest) else ""
        lines.append(f"{file_url(entry)}{member}  {entry.size:,} bytes  -> {data_dir / entry.dest}{state}")
    return lines


def fetch(data_plan: Plan, data_dir: Path) -> Outcome:
    """Download every planned file that is not in place; stop at the first failure (FetchError or WriteError)."""
    make_dir(data_dir)
    outcome = Outcome()
    # a declared folder (Chia's 4,001 files) is filled under a temporary name and renamed when whole, so a partial
    # one is never read as the data set
    staged = {folder: _part(data_dir / folder) for folder in data_plan.folders if not (data_dir / folder).exists()}
    targets = {e.dest: next((stage / e.dest[len(folder) + 1:] for folder, stage in staged.items()
                             if e.dest.startswith(folder + "/")), data_dir / e.dest) for e in data_plan.files}
    todo = []
    for entry in data_plan.files:
        if in_place(entry, targets[entry.dest]):
            outcome.present += 1
        else:
            todo.append(entry)
    archives = list(dict.fromkeys(e.archive for e in todo if e.archive))
    total = sum(e.size for e in todo if not e.archive) + sum(a.size for a in archives)
    direct = [e for e in todo if not e.archive]
    with tqdm(total=total, desc="data get", unit="B", unit_scale=True, leave=False, dynamic_ncols=True,
              disable=not bars_enabled()) as bar, ThreadPoolExecutor(WORKERS) as pool:
        try:
            _all(pool, [(_download, e.dest, file_url(e), targets[e.dest], e.size, e.sha256, bar.update,
                         lambda e=e: by_hand(e, data_dir)) for e in direct])
            outcome.fetched += len(direct)
            outcome.bytes += sum(e.size for e in direct)
            for archive in archives:
                members = [e for e in todo if e.archive == archive]
                bar.set_postfix_str(archive.path, refresh=False)
                _unpack(archive, members, data_dir, targets, bar.update, pool)
                outcome.fetched += len(members)
                outcome.bytes += sum(e.size for e in members)
            for folder, stage in staged.items():
                if stage.is_dir():
                    with writing(data_dir / folder, cleanup=stage):
                        os.replace(stage, data_dir / folder)
        finally:
            written = {targets[e.dest].parent for e in todo} | {(data_dir / f).parent for f in staged}
            for folder in sorted(f for f in written if f.is_dir()):
                _fsync_dir(folder)  # the new names survive a crash
    return outcome


def _part(path: Path) -> Path:
    """The temporary name beside `path` that it is written under."""
    return path.with_name(f".{path.name}.part")


def _all(pool: ThreadPoolExecutor, calls: list[tuple[Any, ...]]) -> None:
    """Run the calls on the pool; the first failure cancels those not started and is raised once the rest end."""
    jobs = [pool.submit(*call) for call in calls]
    try:
        for job in as_completed(jobs):
            job.result()
    except BaseException:
        for job in jobs:
            job.cancel()
        wait(jobs)
        raise


def _unpack(archive: Archive, members: list[SourceFile], data_dir: Path, targets: dict[str, Path],
            progress: Callable[[int], None], pool: ThreadPoolExecutor) -> None:
    """Download the archive beside its first member, then write each member verified by its own sha256 and in place
    (the archive's own hash is recorded for reference only: each file taken from it is checked)."""
    first = members[0]
    url = file_url(first)
    done = data_dir / first.dest.split("/")[0] / f".{Path(archive.path).name}"  # removed once unpacked
    _download(archive.path, url, done, None, None, progress, lambda: by_hand(first, data_dir))
    try:
        with zipfile.ZipFile(done) as bundle:
            contents = [(entry, bundle.read(entry.path)) for entry in members]
        for entry, data in contents:
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise FetchError(f"{entry.dest}: {entry.path} in {url} is not the recorded file: refused, nothing "
                                 f"written; {by_hand(entry, data_dir)}")
        _all(pool, [(_write_verified, targets[entry.dest], data) for entry, data in contents])
    except (KeyError, zipfile.BadZipFile) as exc:
        raise FetchError(f"{first.dest}: {url} cannot be read as the recorded archive ({exc}); "
                         f"{by_hand(first, data_dir)}") from None
    finally:
        done.unlink(missing_ok=True)


def _write_verified(dest: Path, data: bytes) -> None:
    """Bytes already checked, written under a temporary name, fsynced and renamed into place."""
    part = _part(dest)
    with writing(dest, cleanup=part, hint="nothing partial is left; free space and rerun"):
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(part, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, dest)


def _download(name: str, url: str, dest: Path, size: int | None, sha256: str | None,
              progress: Callable[[int], None], route: Callable[[], str]) -> None:
    """`url` to `dest` through `.NAME.part` (`name`: what error lines call it): resumed from a partial file where
    the server allows, verified by size and sha256, fsynced, renamed into place. A mismatch after a resumed download
    starts once from zero. Without a size and hash (an archive whose members are checked), downloaded whole and not
    checked here."""
    part = _part(dest)
    for attempt in range(2):
        digest = hashlib.sha256()
        have = part.stat().st_size if part.is_file() and size is not None else 0
        if size is not None and have > size:
            have = 0
        if have:
            with open(part, "rb") as old:
                for chunk in iter(lambda: old.read(CHUNK), b""):
                    digest.update(chunk)
        with writing(dest, cleanup=part, hint="nothing partial is left; free space and rerun"):
            dest.parent.mkdir(parents=True, exist_ok=True)
            with _response(url, have, name, route) as (response, resumed):
                if have and not resumed:
                    digest, have = hashlib.sha256(), 0
                with open(part, "ab" if have else "wb") as out:
                    progress(have)
                    got = have
                    for chunk in _chunks(response, url, name, route):
                        got += len(chunk)
                        if size is not None and got > size:
                            break
                        digest.update(chunk)
                        out.write(chunk)
                        progress(len(chunk))
                    out.flush()
                    os.fsync(out.fileno())
        if size is None or (got == size and digest.hexdigest() == sha256):
            with writing(dest, cleanup=part):
                os.replace(part, dest)
            return
        part.unlink(missing_ok=True)
        if not have or attempt:
            found = f"{got:,} bytes or more" if got > size else f"sha256 {digest.hexdigest()}, {got:,} bytes"
            raise FetchError(f"{name}: the bytes from {url} are not the recorded file ({found}): refused, nothing "
                             f"written; {route()}")


@contextmanager
def _response(url: str, start: int, name: str, route: Callable[[], str]) -> Iterator[tuple[Any, bool]]:
    """The opened URL (from byte `start`), and whether the server resumed there; a failure is one FetchError line."""
    headers = {"User-Agent": "mtbio-data-get", **({"Range": f"bytes={start}-"} if start else {})}
    try:
        response = urlopen(Request(url, headers=headers), timeout=TIMEOUT_S)
    except HTTPError as exc:
        raise FetchError(f"{name}: cannot download {url}: HTTP {exc.code} {exc.reason}; {route()}") from None
    except (URLError, OSError, HTTPException) as exc:
        raise FetchError(f"{name}: cannot download {url} ({getattr(exc, 'reason', exc)}); {route()}") from None
    try:
        yield response, response.status == 206
    finally:
        response.close()


def _chunks(response: Any, url: str, name: str, route: Callable[[], str]) -> Iterator[bytes]:
    while True:
        try:
            chunk = response.read1(CHUNK)
        except (OSError, HTTPException) as exc:
            raise FetchError(f"{name}: the download of {url} broke off ({exc or type(exc).__name__}); rerun to "
                             f"resume; {route()}") from None
        if not chunk:
            return
        yield chunk


def _fsync_dir(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
