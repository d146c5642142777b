"""Claiming sweep cells so that any number of launchers can share one sweep directory.

A cell `<...>/seed-<s>/` is claimed by creating `<...>/seed-<s>.lock` with O_CREAT|O_EXCL (atomic,
also on NFS). The lock holds its owner (host, pid, job id, start time) and its mtime is the owner's
heartbeat, touched by a thread while the cell trains. A lock is stale when its owner is on this
host and its process is gone, or when its heartbeat is older than `STALE_SECONDS`; a stale lock
is taken over (under a short-lived `.takeover` guard, so only one claimant wins).

A failed attempt is appended to `<...>/seed-<s>.failed.json` (owner, time, error, the traceback's
last lines); a cell is retried until it has failed `retries + 1` times. Delete that file to give
the cell a fresh start.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtbio.fileio import make_dir, write_json, writing

HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 300.0  # a lock whose heartbeat is this old is stale, whoever holds it
TAKEOVER_GUARD_SECONDS = 60.0


def lock_path(run_dir: Path) -> Path:
    return run_dir.with_name(run_dir.name + ".lock")


def failure_path(run_dir: Path) -> Path:
    return run_dir.with_name(run_dir.name + ".failed.json")


def job_id() -> str | None:
    """The scheduler's id of this process's job (SLURM array task, Ray task), if any."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("MTBIO_JOB_ID")


def owner_record() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "job_id": job_id(), "started": time.time()}


def read_owner(path: Path) -> dict[str, Any] | None:
    """The lock's owner record; None when there is no lock. A lock being written reads as {}."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return dict(json.loads(text))
    except (json.JSONDecodeError, TypeError, ValueError):
        return {}


def _process_alive(pid: int, started: float) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        # a recycled pid belongs to a process created after the lock was written
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE \
            and process.create_time() <= started + 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def is_stale(path: Path, now: float | None = None) -> bool:
    """Owner gone (same host, process ended) or heartbeat older than STALE_SECONDS."""
    owner = read_owner(path)
    if owner is None:
        return False
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_SECONDS:
        return True
    if owner.get("host") == socket.gethostname() and "pid" in owner:
        return not _process_alive(int(owner["pid"]), float(owner.get("started", 0)))
    return False


@dataclass
class CellLock:
    """A claimed cell: its heartbeat thread runs until `release`."""

    path: Path
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._stop.wait(HEARTBEAT_SECONDS):
                try:
                    os.utime(self.path)
                except OSError:
                    return
        self._thread = threading.Thread(target=beat, name=f"heartbeat {self.path.name}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _create(path: Path) -> bool:
    with writing(path):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as handle:
            json.dump(owner_record(), handle)
    return True


def claim(run_dir: Path) -> CellLock | None:
    """Claim the cell (taking over a stale lock); None when a live owner holds it."""
    path = lock_path(run_dir)
    make_dir(path.parent)
    if not _create(path):
        if not is_stale(path):
            return None
        guard = path.with_name(path.name + ".takeover")
        try:
            if time.time() - guard.stat().st_mtime > TAKEOVER_GUARD_SECONDS:
                guard.unlink()  # its claimant died mid-takeover
        except FileNotFoundError:
            pass
        if not _create(guard):
            return None
        try:
            if not is_stale(path):  # someone else took it over before we held the guard
                return None
            path.unlink(missing_ok=True)
            if not _create(path):
                return None
        finally:
            guard.unlink(missing_ok=True)
    lock = CellLock(path)
    lock.start_heartbeat()
    return lock


def held_by_other(run_dir: Path) -> bool:
    """A live owner (not stale) holds the cell."""
    path = lock_path(run_dir)
    return path.exists() and not is_stale(path)


def failures(run_dir: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(failure_path(run_dir).read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Append this attempt's error to the cell's failure record (written by the lock holder only)."""
    attempts = failures(run_dir)
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    attempts.append({**owner_record(), "failed": time.time(), "error": f"{type(error).__name__}: {error}",
                     "traceback": "".join(lines)[-4000:]})
    write_json(failure_path(run_dir), attempts)


def failed_out(run_dir: Path, retries: int) -> bool:
    """The cell has used up its attempts (retries + 1)."""
    return len(failures(run_dir)) > retries
