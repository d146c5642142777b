"""Every file mtbio writes goes through this module, so a failed write is reported the same way
everywhere: one `WriteError` line naming the path and the reason (a full disk, a read-only or
missing directory, safetensors' own errors), never a traceback. Files are written under a
temporary name and renamed into place, so a failed write never leaves a torn file behind.

`staged_output` fills a directory a user names (an export) in one step: assembled beside it, checked, then
renamed into place; it refuses to replace files that mtbio did not write there, or that were edited since.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from safetensors import SafetensorError

from mtbio.errors import MtbioError

WRITE_ERRORS: tuple[type[BaseException], ...] = (OSError, SafetensorError)
OWNER_FILE = ".mtbio-output.json"  # in a directory mtbio filled: which command wrote which files

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is larger than this system allows",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "it is a directory",
}


class WriteError(MtbioError):
    """A file or directory could not be written. Names the path and the reason."""

    def __init__(self, path: Path | str, reason: str, hint: str = ""):
        self.path, self.reason, self.hint = str(path), reason, hint
        super().__init__(f"cannot write {path}: {reason}" + (f"; {hint}" if hint else ""))


def reason_of(exc: BaseException) -> str:
    """A short, plain reason for a failed write (safetensors reports the OS error inside its text)."""
    if isinstance(exc, OSError) and exc.errno in _REASONS:
        return _REASONS[exc.errno]
    if isinstance(exc, FileExistsError) and exc.filename and not Path(exc.filename).is_dir():
        return _REASONS[errno.ENOTDIR]  # mkdir -p met a file on the way
    text = str(exc)
    if "No space left" in text or "StorageFull" in text:
        return _REASONS[errno.ENOSPC]
    if "Read-only file system" in text:
        return _REASONS[errno.EROFS]
    if "Permission denied" in text:
        return _REASONS[errno.EACCES]
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return " ".join(text.split())[:200] or type(exc).__name__


@contextmanager
def writing(path: Path | str, cleanup: Path | None = None, hint: str = "") -> Iterator[None]:
    """Turn a failed write inside the block into a `WriteError` naming `path`; `cleanup` (a temporary
    file or directory) is removed first."""
    try:
        yield
    except WriteError as exc:
        _remove(cleanup)
        if hint and not exc.hint:
            raise WriteError(exc.path, exc.reason, hint) from None
        raise
    except WRITE_ERRORS as exc:
        _remove(cleanup)
        raise WriteError(path, reason_of(exc), hint) from None


def _remove(path: Path | None) -> None:
    if path is None or not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def make_dir(path: Path | str) -> Path:
    """`mkdir -p`, with a failure as one line."""
    path = Path(path)
    with writing(path):
        path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_writable(path: Path | str) -> Path:
    """Check, before any long work, that `path` can be written: its directory is created and a probe
    file written and removed there. A file already at `path` is not touched."""
    path = Path(path)
    if path.is_dir():
        raise WriteError(path, "it is a directory; give a file name")
    probe = _tmp_name(path)
    with writing(path, cleanup=probe):
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    return path


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write to; renamed onto `path` when the block ends, removed if it
    fails. A failed write is one `WriteError` line naming `path`."""
    tmp = _tmp_name(path)
    try:
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            yield tmp
            tmp.replace(path)
    except BaseException:
        _remove(tmp)
        raise


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` (UTF-8) atomically: a temporary file renamed into place."""
    path = Path(path)
    with _atomic(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def write_json(path: Path | str, data: Any, indent: int | None = 2) -> Path:
    """Write `data` as JSON (indented, with a final newline) atomically."""
    return write_text(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")


@contextmanager
def open_for_write(path: Path | str, mode: str = "w", newline: str | None = None) -> Iterator[IO[str]]:
    """A text handle for streamed output. `w`: written under a temporary name and renamed into place
    when the block ends; `a`: appended in place. A failed write is one `WriteError` line."""
    path = Path(path)
    if mode == "w":
        with _atomic(path) as tmp, tmp.open("w", encoding="utf-8", newline=newline) as handle:
            yield handle
    elif mode == "a":
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8", newline=newline) as handle:
                yield handle
    else:
        raise ValueError(f"mode {mode!r}: 'w' or 'a'")


def save_tensors(tensors: dict[str, Any], path: Path | str, metadata: dict[str, str] | None = None) -> Path:
    """`safetensors.torch.save_file`, atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    with _atomic(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
    return path


def save_module(module: Any, path: Path | str) -> Path:
    """`safetensors.torch.save_model` (shared tensors handled), atomically."""
    from safetensors.torch import save_model

    path = Path(path)
    with _atomic(path) as tmp:
        save_model(module, str(tmp))
    return path


def save_pretrained(obj: Any, directory: Path | str, **kwargs: Any) -> Path:
    """`obj.save_pretrained(directory, **kwargs)` (a model, tokenizer, config or PEFT adapter config)."""
    directory = Path(directory)
    with writing(directory):
        obj.save_pretrained(directory, **kwargs)
    return directory


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> Path:
    """A matplotlib figure, written atomically (the format follows the path's suffix)."""
    path = Path(path)
    with _atomic(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path


def fresh_dir(target: Path) -> Path:
    """An empty temporary directory beside `target`, to be moved into place by `replace_dir`."""
    tmp = target.with_name(f".tmp-{target.name}")
    with writing(target, cleanup=tmp):
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    return tmp


def replace_dir(tmp: Path, target: Path) -> None:
    """Move the finished directory `tmp` to `target`, replacing what was there."""
    old = target.with_name(f".old-{target.name}")
    with writing(target, cleanup=tmp):
        if old.exists():
            shutil.rmtree(old)
        if target.exists():
            target.rename(old)
        tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _signature(path: Path) -> list[int]:
    """Size and modification time of a file, or of every file under a directory: what an edit changes."""
    files = sorted(q for q in path.rglob("*") if q.is_file()) if path.is_dir() else [path]
    stats = [q.stat() for q in files]
    return [len(files), sum(st.st_size for st in stats), max((st.st_mtime_ns for st in stats), default=0)]


def owned_files(directory: Path) -> dict[str, list[int] | None]:
    """The names an mtbio command recorded as written into `directory`, with their signatures when it recorded
    them (None in a record of an older mtbio)."""
    path = Path(directory) / OWNER_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        files = record.get("files", {})
        return {str(n): None for n in files} if isinstance(files, list) else {str(n): s for n, s in files.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _foreign_files(directory: Path) -> dict[str, str]:
    """The files in `directory` that mtbio did not write, or that were changed after it wrote them, each with why."""
    if not directory.is_dir():
        return {}
    owned = owned_files(directory)
    foreign = {}
    for entry in sorted(directory.iterdir()):
        if entry.name == OWNER_FILE:
            continue
        if entry.name not in owned:
            foreign[entry.name] = "mtbio did not write it"
        elif owned[entry.name] is not None and owned[entry.name] != _signature(entry):
            foreign[entry.name] = "edited since mtbio wrote it"
    return foreign


@contextmanager
def staged_output(directory: Path | str, command: str, overwrite: bool = False,
                  failed: str = "nothing in it was changed") -> Iterator[Path]:
    """A new, empty directory beside `directory` to assemble an output in (`.tmp-<name>`). When the block ends,
    the files it holds are recorded in its `.mtbio-output.json` (with their sizes and times) and it replaces
    `directory` in one rename; if the block fails, nothing in `directory` changes and the staging is removed.

    Files in `directory` that mtbio did not write, or that were edited after it wrote them, are refused before
    the block starts unless `overwrite`; with `overwrite`, those the new output does not replace are kept.
    A failed write is one `WriteError` naming `directory`, with `failed` after it. A staging left by a killed
    process is replaced by the next one."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise MtbioError(f"{directory}: exists and is not a directory")
    foreign = _foreign_files(directory)
    if foreign and not overwrite:
        shown = ", ".join(f"{name} ({why})" for name, why in list(foreign.items())[:5])
        raise MtbioError(f"{directory} holds files mtbio must not replace: {shown}"
                         f"{', ...' if len(foreign) > 5 else ''}; choose an empty or new directory, or pass "
                         "--overwrite to replace them")
    stage = fresh_dir(directory)
    try:
        with writing(directory):
            yield stage
            written = {p.name: _signature(p) for p in sorted(stage.iterdir())}
            for name in foreign:  # --overwrite: a user's file that the new output does not replace stays
                if name not in written:
                    source = directory / name
                    (shutil.copytree if source.is_dir() else shutil.copy2)(source, stage / name)
            write_json(stage / OWNER_FILE, {"command": command, "files": written})
            replace_dir(stage, directory)
    except WriteError as exc:  # named by the output, not by the staging directory
        _remove(stage)
        raise WriteError(directory, exc.reason, failed) from None
    except BaseException:
        _remove(stage)
        raise
