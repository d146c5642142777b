"""Reading speed: every task whose data is present, every split, through `read_split`, parsed and then from
the read cache (`mtbio/data/split_cache.py`, in a fresh temporary MTBIO_CACHE_DIR; the parsed pass fills it).

    python benchmarks/bench_read.py --data-dir ../shared/data

Writes benchmarks/results/read.json (per task: seconds parsed and cached, examples per split; totals and
their ratio; machine) and prints a one-line summary. Tasks with missing files are listed as skipped (a
task with some splits present, such as ebm-pico without train, is timed on the splits it has).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import RESULTS, machine

from mtbio.data.loading import read_split
from mtbio.tasks.loading import load_catalog, resolve_data_dir, split_paths



def bench(data_dir: Path) -> dict[str, Any]:
    """Time read_split for every present split of every catalog task: parsed (cache empty), then cached."""
    tasks: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    totals = {"parsed": 0.0, "cached": 0.0}
    for task in load_catalog().tasks.values():
        present = [s for s in task.has_splits if all(p.exists() for p in split_paths(task, s, data_dir))]
        if not present:
            skipped[task.name] = "data missing"
            continue
        tasks[task.name] = {}
        for label in totals:
            t0 = time.perf_counter()
            counts = {s: len(read_split(task, s, data_dir)) for s in present}
            tasks[task.name][f"{label}_seconds"] = round(time.perf_counter() - t0, 3)
            totals[label] += time.perf_counter() - t0
        tasks[task.name]["examples"] = counts
    return {"data_dir": str(data_dir), "total_seconds": round(totals["parsed"], 3),
            "total_cached_seconds": round(totals["cached"], 3),
            "cached_speedup": round(totals["parsed"] / totals["cached"], 2),
            "total_examples": sum(sum(t["examples"].values()) for t in tasks.values()),
            "tasks": tasks, "skipped": skipped, "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="Where the datasets live (default: MTBIO_DATA_DIR).")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)
    if data_dir is None or not data_dir.is_dir():
        sys.exit("error: pass --data-dir or set MTBIO_DATA_DIR to an existing directory")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MTBIO_CACHE_DIR"] = cache
        result = bench(data_dir)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "read.json").write_text(json.dumps(result, indent=2) + "\n")
    slowest = max(result["tasks"].items(), key=lambda kv: kv[1]["parsed_seconds"])
    print(f"read {result['total_examples']} examples of {len(result['tasks'])} tasks in "
          f"{result['total_seconds']:.1f} s parsed, {result['total_cached_seconds']:.1f} s cached "
          f"(×{result['cached_speedup']}; slowest: {slowest[0]} {slowest[1]['parsed_seconds']:.1f} s; "
          f"skipped {len(result['skipped'])} without data) -> {RESULTS / 'read.json'}")


if __name__ == "__main__":
    main()
