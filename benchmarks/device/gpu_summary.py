"""The last step of `gpu_set.sh`: one index of the set's results, to `OUT.json`, and its figures printed.

    python benchmarks/device/gpu_summary.py RESULTS_DIR STEPS_TSV OUT.json

RESULTS_DIR holds a folder per step with that step's JSON files (`device/device.json` first); STEPS_TSV one line
per step (name, status, seconds, note). The index names every file with its headline figures: each `bench_train` side's
examples/s, steady share of the bf16 peak and dev score, and the ratios; the profile's time per step, device
busy and idle between kernels; each sweep setting's aggregate examples/s and utilisation.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SIDE_FIGURES = ("train_examples_per_second", "steady_train_examples_per_second", "fraction_of_peak",
                "steady_fraction_of_peak", "dev_mean", "peak_memory_mb")
RATIO_PREFIXES = ("speed_ratio_", "steady_speed_ratio_", "difference_points_", "compiled_vs_eager_",
                  "trainer_compiled_vs_eager_")
PROFILE_FIGURES = ("wall_seconds_per_step", "self_cpu_seconds_per_step", "kernel_gaps", "device_time")
SWEEP_FIGURES = ("parallel", "cells", "wall_seconds", "train_examples", "aggregate_train_examples_per_second",
                 "throughput_over_one_cell", "mean_utilisation_percent", "utilisation_samples", "utilisation",
                 "efficiency")


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of one result file, by its kind (bench_train, profile_step, bench_sweep, device)."""
    if "sides" in result:
        return {"task": result["task"], "encoder": result["encoder"],
                "batch_size": result["hyperparameters"]["batch_size"],
                "sides": {key: {k: side[k] for k in SIDE_FIGURES if k in side}
                          for key, side in result["sides"].items()},
                **{k: v for k, v in result.items() if k.startswith(RATIO_PREFIXES)}}
    if "profiled_steps" in result:
        top = result.get("top_device_ops") or result["top_ops"]
        return {**{k: result[k] for k in PROFILE_FIGURES if k in result},
                "top_ops": [row["op"] for row in top[:5]]}
    if "runs" in result:
        return {"runs": [{k: run[k] for k in SWEEP_FIGURES if k in run} for run in result["runs"]]}
    return {k: result[k] for k in ("device", "cuda", "precision", "matmul_peak_flops_per_second") if k in result}


def index(results: Path, steps_file: Path) -> dict[str, Any]:
    """The device, its peak, each step's status and time, and each file's figures."""
    found = results / "device" / "device.json"
    device = json.loads(found.read_text()) if found.exists() else {}
    steps = []
    for line in steps_file.read_text().splitlines() if steps_file.exists() else []:
        name, status, seconds, *note = line.split("\t")
        files = sorted((results / name).glob("*.json")) if (results / name).is_dir() else []
        steps.append({"step": name, "status": status, "seconds": int(seconds), **({"note": note[0]} if note else {}),
                      "files": {f"{name}/{f.name}": figures(json.loads(f.read_text())) for f in files}})
    return {"device": device.get("device", "unknown: device.json missing"), "cuda": device.get("cuda"),
            "matmul_peak_flops_per_second": device.get("matmul_peak_flops_per_second"), "steps": steps}


def lines(summary: dict[str, Any]) -> list[str]:
    """What the terminal shows: the device and peak, then a line per step and per bench_train side."""
    peak = summary["matmul_peak_flops_per_second"] or {}
    out = [f"device {summary['device']} ({summary['cuda']}); matmul peak "
           + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in peak.items())]
    for step in summary["steps"]:
        out.append(f"{step['step']}: {step['status']}, {step['seconds']} s" + (f" ({step['note']})" if "note" in step
                                                                              else ""))
        for name, found in step["files"].items():
            for key, side in found.get("sides", {}).items():
                share = side.get("steady_fraction_of_peak", side.get("fraction_of_peak"))
                out.append(f"  {name} {key}: {side['train_examples_per_second']:.1f} ex/s"
                           + (f", {share:.1%} of peak" if share is not None else "") + f", dev {side['dev_mean']:.4f}")
            for run in found.get("runs", []):
                out.append(f"  {name} --parallel {run['parallel']}: "
                           + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in run.items() if k != "parallel"))
            if "wall_seconds_per_step" in found:
                out.append(f"  {name}: {found['wall_seconds_per_step']:.4f} s a step, "
                           f"{found.get('kernel_gaps', found.get('device_time'))}")
    return out


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    summary = index(Path(sys.argv[1]), Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps(summary, indent=2) + "\n")
    print("\n".join(lines(summary)))


if __name__ == "__main__":
    main()
