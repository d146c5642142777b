"""How long the commands that train nothing take to start: `mtbio --help` and `mtbio tasks check DEF`, each a fresh
process, against the same check in a process that first imports what validating a definition imported before the
kinds' heads moved out of their declarations (torch and datasets). Median of `--repeats` runs of each.

    python benchmarks/bench_startup.py [--repeats 7]     # → results/bench_startup.json
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import machine, write_result

ROOT = Path(__file__).resolve().parent.parent
DEFINITION = str(ROOT / "task_defs" / "ncbi-disease.yml")
CHECK = f"from mtbio.cli import main\ntry:\n    main(['tasks', 'check', {DEFINITION!r}])\nexcept SystemExit:\n    pass\n"
COMMANDS = {
    "help": "from mtbio.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n",
    "tasks_check": CHECK,
    "tasks_check_with_torch_and_datasets": "import torch, datasets\n" + CHECK,  # what the check imported before
}


def seconds(code: str, repeats: int) -> list[float]:
    """Wall time of `repeats` fresh interpreters running `code`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs = {name: seconds(code, args.repeats) for name, code in COMMANDS.items()}
    medians = {name: statistics.median(times) for name, times in runs.items()}
    result = {"question": "how long a command that trains nothing takes to start (median of fresh processes)",
              "machine": machine(), "repeats": args.repeats, "seconds": runs, "median_seconds": medians,
              "ratio_check_before_over_after": medians["tasks_check_with_torch_and_datasets"] / medians["tasks_check"]}
    print({name: round(value, 3) for name, value in medians.items()}, "ratio", round(result["ratio_check_before_over_after"], 2))
    print(write_result("bench_startup", result))


if __name__ == "__main__":
    main()
