"""Where the `mtbio` logger's lines go: the terminal (above the progress bars) and each run's run.log.

The CLI calls `configure_console` once per command (`-v` for DEBUG, `-q` for warnings only); a run
calls `run_log(run_dir)` around its training, so the run directory keeps its own history: resume
point, truncation counts, skipped batches, the packing decision and every warning. Only the main
process of a multi-process run writes either.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Iterator, TextIO

from tqdm import tqdm

LOGGER = "mtbio"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TqdmHandler(logging.Handler):
    """Writes through `tqdm.write`, so a line never breaks a progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 (logging must never raise)
            self.handleError(record)


_BARS = True  # progress bars on (off with `mtbio -q`)


def bars_enabled() -> bool:
    """Whether mtbio's progress bars are shown (the CLI's -q turns them off)."""
    return _BARS


def is_main_process() -> bool:
    """Rank 0 (or no distributed launch at all), from the launcher's environment."""
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))) == 0


def configure_console(verbosity: int) -> None:
    """INFO and above to the terminal (DEBUG with verbosity > 0; with < 0 errors only and no progress
    bars); main process only."""
    global _BARS
    _BARS = verbosity >= 0
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, TqdmHandler)]:
        logger.removeHandler(handler)
    level = logging.DEBUG if verbosity > 0 else logging.ERROR if verbosity < 0 else logging.INFO
    handler = TqdmHandler(level=level if is_main_process() else logging.ERROR)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s" if level > logging.INFO else "%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


class RunLogHandler(logging.Handler):
    """INFO lines for a run's run.log: kept in memory until the run directory exists (it is created
    only once the data and model have loaded), then appended to the file as they come."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter(FORMAT))
        self._pending: list[str] = []
        self._stream: TextIO | None = None

    def attach(self, path: Path) -> None:
        """Start writing to `path` (appending: a resumed run continues its log), pending lines first."""
        self._stream = path.open("a", encoding="utf-8")  # an OSError here is the caller's to report
        self._stream.writelines(line + "\n" for line in self._pending)
        self._stream.flush()
        self._pending = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if self._stream is None:
                self._pending.append(line)
            else:
                self._stream.write(line + "\n")
                self._stream.flush()
        except OSError:  # a full or read-only disk: the run says so itself where it writes; run.log stops here
            self.close()
        except Exception:  # noqa: BLE001 (logging must never raise)
            self.handleError(record)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


@contextlib.contextmanager
def run_log() -> Iterator[RunLogHandler]:
    """Collect the `mtbio` logger's INFO lines while the block runs; `attach` the handler to run.log."""
    logger = logging.getLogger(LOGGER)
    handler = RunLogHandler()
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        handler.close()
