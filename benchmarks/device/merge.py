"""Merge `bench_train.py` results whose sides ran as separate jobs at the same time (each pinned to cores of its
own), so that a short lease fits sides that would not fit one after the other:

    python benchmarks/device/merge.py OUT.json MTBIO_SIDE.json TRAINER_SIDE.json [...]

The inputs must be of one task and one set of hyperparameters. Ratios and shares of the peak are then computed
as `bench_train.py` does, against the highest matmul peak measured by any of the jobs; each side keeps the name
of the file it came from (folder/name).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_train import summarise  # noqa: E402
from common import highest_peaks  # noqa: E402

SAME = ("task", "metric", "hyperparameters", "seeds", "max_train_examples", "mtbio_batching")


def merge(paths: list[Path]) -> tuple[dict[str, Any], str]:
    """The merged result and its one-line summary."""
    results = [json.loads(path.read_text()) for path in paths]
    first = results[0]
    for path, result in zip(paths[1:], results[1:]):
        different = [key for key in SAME if result.get(key) != first.get(key)]
        if different:
            raise SystemExit(f"{path}: differs from {paths[0]} in {', '.join(different)}")
    merged = {key: value for key, value in first.items() if key not in ("sides", "matmul_peak_measurements")}
    merged["sides"] = {}
    names = [f"{path.parent.name}/{path.name}" for path in paths]
    for path, name, result in zip(paths, names, results):
        for key, side in result["sides"].items():
            if key in merged["sides"]:
                raise SystemExit(f"{path}: side {key} is in two inputs")
            merged["sides"][key] = {**side, "from_file": name}
    measured = [m for result in results for m in result.get("matmul_peak_measurements", [])]
    merged["matmul_peak_measurements"] = measured
    merged["matmul_peak_flops_per_second"] = highest_peaks(measured)
    merged["merged_from"] = names
    line = summarise(SimpleNamespace(name=first["task"]), merged, merged["matmul_peak_flops_per_second"])
    return merged, line


def main() -> None:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    merged, line = merge([Path(name) for name in sys.argv[2:]])
    Path(sys.argv[1]).write_text(json.dumps(merged, indent=2) + "\n")
    print(f"{line} -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
