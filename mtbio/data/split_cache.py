"""Read splits kept on disk, so that a split is parsed and checked once per content of its files.

Reading a split (parsing its files, mapping and checking every label, taking a subset) costs seconds for the
larger corpora, and every cell of a sweep, every `tasks list` and every predictor reads the same splits again.
`cached(name, identity, paths, compute)` returns what `compute()` returned for the same identity and the same file
contents, saved as JSON under MTBIO_CACHE_DIR/examples; the identity names the task definition, the split and
the subset, and the source of the code that reads them (so a changed reader never serves stale examples).
A cache that cannot be written costs time, not the run.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mtbio.fileio import WriteError, write_json

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """MTBIO_CACHE_DIR, else ~/.cache/mtbio/features."""
    env = os.environ.get("MTBIO_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "mtbio" / "features"


def file_fingerprint(paths: Iterable[str | os.PathLike[str]]) -> str:
    """A short hash of the data files' resolved paths and contents (every file of a directory).
    Contents, not sizes and times: a same-size fix copied with its old time (`cp -p`) must not reuse
    stale data. Hashing costs about 13 ms for the largest shipped file (DDI train, 9.2 MB)."""
    digest = hashlib.sha256()
    for file in _files(paths):
        digest.update(f"{file}\n".encode())
        _hash_contents(file, digest)
    return digest.hexdigest()[:16]


def file_records(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Per data file (every file of a directory), what a run records of what it read: its path, size, modification
    time and a hash of its contents (the contents decide whether it changed; size and time say how)."""
    records = []
    for file in _files(paths):
        stat = file.stat()
        records.append({"file": str(file), "size": stat.st_size, "mtime": stat.st_mtime,
                        "sha256": file_sha256(file)})
    return records


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    return _hash_contents(Path(path), hashlib.sha256()).hexdigest()


def _files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files of `paths`, resolved and in order, a directory standing for every file under it."""
    files: list[Path] = []
    for path in sorted(Path(p).resolve() for p in paths):
        files.extend(sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path])
    return files


def _hash_contents(file: Path, digest: Any) -> Any:
    """`digest` updated with the file's bytes (read in blocks); returned."""
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest


@functools.cache
def code_fingerprint(*packages: str) -> str:
    """A short hash of the source files of the given modules and packages (every module of a package)."""
    digest = hashlib.sha256()
    for name in packages:
        origin = Path(importlib.util.find_spec(name).origin)  # type: ignore[union-attr, arg-type]
        for file in sorted(origin.parent.glob("*.py")) if origin.name == "__init__.py" else [origin]:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def cached(name: str, identity: dict[str, Any], paths: list[Path], compute: Callable[[], Any]) -> Any:
    """`compute()`'s JSON-able result, from the cache when `identity` and the contents of `paths` match."""
    key = hashlib.sha256(json.dumps({**identity, "files": file_fingerprint(paths)}, sort_keys=True).encode())
    target = default_cache_dir() / "examples" / f"{name}-{key.hexdigest()[:24]}.json"
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # not cached yet, or no cache directory can exist there
        pass
    except (OSError, ValueError) as error:
        log.warning("ignoring unreadable cache entry %s (%s)", target, error)
    value = compute()
    try:
        write_json(target, value, indent=None)  # atomic: whole or absent, whichever process wins
    except WriteError as error:
        log.debug("split not cached (%s)", error)
    return value
