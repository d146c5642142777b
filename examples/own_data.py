"""Your own data from Python: a `datasets.DatasetDict` in memory → an mtbio task → fine-tuned and scored.

    python examples/own_data.py [--encoder DIR] [--output runs/own-data]

The notes are made up (two phrasings of a smoking status); the point is the path, not the task.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

import datasets

import mtbio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", help="encoder directory or hub name (default: the packaged MiniLM)")
    parser.add_argument("--output", default="runs/own-data")
    parser.add_argument("--max-steps", default="20")
    args = parser.parse_args()

    features = datasets.Features({"note": datasets.Value("string"),
                                  "smoker": datasets.ClassLabel(names=["no", "yes"])})
    notes = {"train": (["Smokes a pack a day.", "Never smoked.", "Current smoker, 20 cigarettes daily.",
                        "Denies any tobacco use."] * 8, [1, 0, 1, 0] * 8),
             "validation": (["He smokes every day.", "No history of smoking."] * 4, [1, 0] * 4)}
    dataset = datasets.DatasetDict({split: datasets.Dataset.from_dict({"note": text, "smoker": label},
                                                                      features=features)
                                    for split, (text, label) in notes.items()})
    task = mtbio.task_from_dataset(dataset, name="smoking", type="classification",
                                   columns={"text": "note", "label": "smoker"}, metric="accuracy")
    command = [sys.executable, "-m", "mtbio", "finetune", "--task", task.name, "--task-defs", str(task.task_defs),
               "--data-dir", str(task.data_dir), "--max-steps", args.max_steps, "--output", args.output]
    if args.encoder:
        command += ["--encoder", args.encoder]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
