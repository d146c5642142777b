"""A run's results.json: its final scores, stage and throughput, written last by the training run,
so a run directory that has one is finished. The one writer and reader of that file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.fileio import write_json

RESULTS_FILE = "results.json"


def results_path(run_dir: Path) -> Path:
    return Path(run_dir) / RESULTS_FILE


def is_finished(run_dir: Path) -> bool:
    """Whether the run in `run_dir` finished (its results.json is there)."""
    return results_path(run_dir).is_file()


def write_results(run_dir: Path, results: dict[str, Any]) -> Path:
    """Write `results` as the run's results.json (indented JSON); returns its path."""
    return write_json(results_path(run_dir), results)


def read_results(run_dir: Path) -> dict[str, Any]:
    """The run's results.json; MtbioError naming the file when it is missing, unreadable or not a JSON object."""
    path = results_path(run_dir)
    try:
        results = json.loads(path.read_text())
    except FileNotFoundError:
        raise MtbioError(f"{path}: missing (not a finished run)") from None
    except (OSError, ValueError) as exc:
        raise MtbioError(f"{path}: unreadable ({exc})") from None
    if not isinstance(results, dict):
        raise MtbioError(f"{path}: unreadable (not a JSON object)")
    return results
