"""Prediction on raw text with a saved run: `mtbio.load(run_dir).predict(task, texts)` and `mtbio predict`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from mtbio.data.pipeline import featurize_raw, raw_inputs_to_examples
from mtbio.errors import DataFormatError, MtbioError
from mtbio.model.inference import predict_split
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.persist import load_model
from mtbio.tasks.loading import load_task_def
from mtbio.tasks.schema import TaskDef


def read_run_tasks(run_dir: Path) -> dict[str, TaskDef]:
    """The resolved task definitions saved in `<run_dir>/tasks/`."""
    directory = Path(run_dir) / "tasks"
    if not directory.is_dir():
        raise MtbioError(f"{run_dir}: not an mtbio run directory (no tasks/)")
    return {t.name: t for t in (load_task_def(p) for p in sorted(directory.glob("*.yml")))}


@dataclass
class LoadedRun:
    """A run directory loaded for inference: the model, its tokenizer and its task definitions."""

    run_dir: Path
    model: MultiTaskModel
    tokenizer: Any
    tasks: dict[str, TaskDef]
    batch_size: int = 64

    def predict(self, task: str, texts: Sequence[str | Sequence[str]]) -> list[Any]:
        """Predictions for raw inputs: labels, tag lists (one per whitespace word) or scores.

        Pair tasks take "text a<TAB>text b" strings or (a, b) tuples; tagging tasks take a
        sentence string or a list of words.
        """
        if task not in self.tasks:
            raise MtbioError(f"{self.run_dir}: no task '{task}' (tasks: {', '.join(self.tasks)})")
        definition = self.tasks[task]
        data = featurize_raw(definition, raw_inputs_to_examples(definition, texts), self.tokenizer)
        device = next(self.model.parameters()).device
        return predict_split(self.model, task, data, int(self.tokenizer.pad_token_id or 0), self.batch_size, device)


def load_run(run_dir: Path | str) -> LoadedRun:
    """Load encoder, heads and task definitions (safetensors and JSON/YAML only; never unpickles)."""
    run_dir = Path(run_dir)
    tasks = read_run_tasks(run_dir)
    model, tokenizer = load_model(run_dir, list(tasks))
    model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    return LoadedRun(run_dir, model, tokenizer, tasks)


def read_inputs(path: Path) -> list[str]:
    """One input per line (UTF-8). Empty lines are errors naming the line, never skipped."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise MtbioError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFormatError(path, line, "not valid UTF-8; re-encode the file as UTF-8") from None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise DataFormatError(path, number, "empty line; remove it (each line is one input)")
    if not lines:
        raise DataFormatError(path, None, "no inputs (the file is empty)")
    return lines


def predict_file(run_dir: Path, task: str, input_path: Path, output_path: Path | None) -> Path:
    """Write one JSON line per input line: {"input": ..., "prediction": ...}."""
    inputs = read_inputs(input_path)
    run = load_run(run_dir)
    predictions = run.predict(task, inputs)
    output_path = output_path or Path(run_dir) / "predictions" / f"{task}-{Path(input_path).stem}.jsonl"
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with output_path.open("w", encoding="utf-8") as handle:
        for text, prediction in zip(inputs, predictions):
            record: dict[str, Any] = {"input": text, "prediction": prediction}
            if run.tasks[task].type == "tagging":
                record["words"] = text.split()
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return output_path
