"""Prediction on raw text with a saved run: `mtbio.load(run_dir).predict(task, texts)` and `mtbio predict`."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from mtbio.data.pipeline import featurize_raw, raw_inputs_to_examples
from mtbio.data.readers.text import iter_lines
from mtbio.errors import DataFormatError, MtbioError
from mtbio.fileio import ensure_writable, open_for_write
from mtbio.model.inference import (autocast_for, predict_shared, predict_split, resolve_inference_precision,
                                   same_encoder_inputs)
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.persist import load_model
from mtbio.tasks.loading import load_run_tasks
from mtbio.tasks.schema import TaskDef
from mtbio.run_dir import RunDir

log = logging.getLogger(__name__)


@dataclass
class LoadedRun:
    """A run directory loaded for inference: the model, its tokenizer and its task definitions."""

    run_dir: Path
    model: MultiTaskModel
    tokenizer: Any
    tasks: dict[str, TaskDef]
    batch_size: int = 64
    precision: str = "no"  # resolved: `no` (fp32) or `bf16` (autocast)

    def predict(self, task: str | Sequence[str], texts: Sequence[str | Sequence[str]],
                scores: bool = False) -> list[Any]:
        """Predictions for raw inputs: labels, tag lists (one per word) or scores.

        Pair tasks take "text a<TAB>text b" strings or (a, b) tuples; tagging tasks take a sentence
        string (split into words and punctuation, `split_words`) or a list of words. With `scores`,
        each item is (prediction, probabilities): per label for classification and multi-label
        tasks, per word (of its tag) for tagging, None for regression. A list of tasks gives one
        {task: prediction} per input, the tasks whose inputs tokenize alike sharing one encoder pass.
        """
        if not isinstance(task, str):
            return self._predict_tasks(list(task), texts, scores)
        data = self._featurize(task, texts)
        device = next(self.model.parameters()).device
        return predict_split(self.model, task, data, int(self.tokenizer.pad_token_id or 0), self.batch_size, device,
                             autocast=autocast_for(self.precision, device), with_scores=scores)

    def _featurize(self, task: str, texts: Sequence[str | Sequence[str]]) -> Any:
        if task not in self.tasks:
            raise MtbioError(f"{self.run_dir}: no task '{task}' (tasks: {', '.join(self.tasks)})")
        definition = self.tasks[task]
        return featurize_raw(definition, raw_inputs_to_examples(definition, texts), self.tokenizer)

    def _predict_tasks(self, tasks: list[str], texts: Sequence[str | Sequence[str]], scores: bool) -> list[Any]:
        """Every task's prediction per input: tasks grouped by identical encoder inputs, one encoder pass per group
        (tasks with LoRA adapters: PEFT's mixed-adapter batches)."""
        datas = {task: self._featurize(task, texts) for task in tasks}
        groups: list[list[str]] = []
        for task in tasks:
            group = next((g for g in groups if same_encoder_inputs(datas[g[0]], datas[task])), None)
            if group is None:
                groups.append([task])
            else:
                group.append(task)
        device = next(self.model.parameters()).device
        autocast, pad = autocast_for(self.precision, device), int(self.tokenizer.pad_token_id or 0)
        found: dict[str, list[Any]] = {}
        for group in groups:
            if len(group) == 1:
                found[group[0]] = predict_split(self.model, group[0], datas[group[0]], pad, self.batch_size, device,
                                                autocast=autocast, with_scores=scores)
            else:
                found.update(predict_shared(self.model, {t: datas[t] for t in group}, pad, self.batch_size, device,
                                            autocast, scores))
        return [{task: found[task][i] for task in tasks} for i in range(len(texts))]

    def entities(self, task: str, texts: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Entity spans of a tagging task in raw text: text, type, character start/end (so that
        `text[start:end]` is the entity) and score (mean probability of its words' tags)."""
        if self.tasks.get(task) is None or not self.tasks[task].kind.labels.per_word:
            raise MtbioError(f"task '{task}' is not a tagging task of {self.run_dir}")
        kind = self.tasks[task].kind
        return [kind.postprocess(text, tags, probs)["entities"]
                for text, (tags, probs) in zip(texts, self.predict(task, list(texts), scores=True))]


def load_run(run_dir: Path | str, precision: str = "auto") -> LoadedRun:
    """Load encoder, heads and task definitions (safetensors and JSON/YAML only; never unpickles).

    `precision`: `auto` (the precision the run was trained in, where the hardware has it), `no`
    (fp32) or `bf16`."""
    run_dir = Path(run_dir)
    tasks = load_run_tasks(run_dir)
    model, tokenizer = load_model(run_dir, list(tasks))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).eval()
    return LoadedRun(run_dir, model, tokenizer, tasks,
                     precision=resolve_inference_precision(precision, trained_precision(run_dir), device))


def trained_precision(run_dir: Path) -> str | None:
    """The mixed precision results.json records for the run (None where it records none)."""
    try:
        return RunDir(run_dir).results().get("mixed_precision")
    except MtbioError:
        return None


def read_inputs(path: Path) -> list[str]:
    """One input per line (UTF-8), split on '\\n' only as the data readers do: the other characters
    `str.splitlines` breaks at (form feed, U+2028, U+0085...) stay inside their line. Empty lines are
    errors naming the line, never skipped."""
    lines = [line for _, line in iter_lines(Path(path))]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise DataFormatError(path, number, "empty line; remove it (each line is one input)")
    if not lines:
        raise DataFormatError(path, None, "no inputs (the file is empty)")
    return lines


def predict_file(run_dir: Path, tasks: str | Sequence[str], input_path: Path, output_path: Path | None,
                 scores: bool = False, precision: str = "auto") -> Path:
    """Write one JSON line per input line: {"input", "prediction"} (+ "scores" with `scores`); tagging
    tasks add "words" and "entities" (text, type, character start/end, score), and each kind its own postprocess keys
    (span extraction's "answer"). Several `tasks`: one line per input with each of these keys holding {task: value},
    the tasks that tokenize alike sharing an encoder pass. Each task is predicted with its own weights (a
    `--select per-task` run: its `best/<task>/`), and a log line names them."""
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    inputs = read_inputs(input_path)
    output_path = output_path or Path(run_dir) / "predictions" / f"{'+'.join(names)}-{Path(input_path).stem}.jsonl"
    ensure_writable(output_path)  # before the model runs, not after
    # each task with its own weights (a --select per-task run: best/<task>/), one pass per set of weights
    weights = {task: RunDir(run_dir).model_dir_for(task) for task in names}
    runs: dict[str, LoadedRun] = {}
    found: dict[str, list[Any]] = {}
    for source in dict.fromkeys(weights.values()):
        group = [task for task in names if weights[task] == source]
        run = load_run(source, precision)
        for task in group:
            log.info("%s: predicted with the weights in %s (%s)", task, source, _selection(source))
        rows = run.predict(group, inputs, scores=True)
        for task in group:
            runs[task], found[task] = run, [row[task] for row in rows]
    with open_for_write(output_path) as handle:
        for i, text in enumerate(inputs):
            records = {task: _record(runs[task], task, text, *found[task][i], scores) for task in names}
            keys = dict.fromkeys(key for r in records.values() for key in r if key != "input")  # a kind's own too
            record = records[names[0]] if isinstance(tasks, str) else \
                {"input": text, **{key: {t: r[key] for t, r in records.items() if key in r} for key in keys}}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return output_path


def _selection(weights: Path) -> str:
    """Which evaluation chose the weights in `weights`, from its results.json."""
    try:
        results = RunDir(weights).results()
    except MtbioError:
        return "no results.json"
    if results.get("stage") == "merge":
        return "merged, no training of its own"
    step = results.get("best_step", "?")
    return (f"the task's own best dev evaluation, step {step}, --select per-task"
            if results.get("selected") == "per-task" else f"the run's best dev evaluation, step {step}")


def _record(run: LoadedRun, task: str, text: str, prediction: Any, probabilities: Any, scores: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"input": text, "prediction": prediction}
    if scores and probabilities is not None:
        record["scores"] = probabilities
    return {**record, **run.tasks[task].kind.postprocess(text, prediction, probabilities)}
