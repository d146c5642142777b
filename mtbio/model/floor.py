"""The floor a trained task must clear: the best of its trivial score and its encoder's no-training baselines
(`mtbio.model.probes`) on the run's own training subset and dev split. The baselines are computed once per (encoder,
task definition, training subset, scored examples, length) and cached as JSON under MTBIO_CACHE_DIR/baselines, so every run of a sweep on the same start reads them
back. A cache that cannot be written costs time, not the run."""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mtbio.data.example import Example
from mtbio.data.featurize import examples_fingerprint
from mtbio.data.split_cache import default_cache_dir
from mtbio.evaluation.metrics import metric_sign
from mtbio.evaluation.trivial import NEAR_TRIVIAL
from mtbio.fileio import WriteError, write_json
from mtbio.model import probes
from mtbio.tasks.schema import TaskDef

log = logging.getLogger(__name__)
TRIVIAL = "trivial"
PROBE_NAMES = {TRIVIAL: "its trivial score (the best constant prediction)",
               "probe": "a logistic regression on frozen features", "cosine-mean": "the encoder's zero-shot cosine",
               "cosine-cls": "the encoder's zero-shot [CLS] cosine"}


def encoder_identity(source: str) -> str:
    """What names an encoder's weights: the path with each file's size and time, or a hub id as given."""
    path = Path(source)
    if not path.is_dir():
        return source
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return json.dumps([str(path.resolve())] + [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files])


def _key(task: TaskDef, encoder_id: str, train: Sequence[Example], scored: Sequence[Example], max_length: int) -> str:
    parts = [encoder_id, json.dumps(task.model_dump(mode="json"), sort_keys=True), examples_fingerprint(train),
             examples_fingerprint(scored), str(max_length), inspect.getsource(probes)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


def no_training_baselines(task: TaskDef, encoder_source: str, load: Any, train: Sequence[Example],
                          scored: Sequence[Example], max_length: int) -> dict[str, float]:
    """{baseline: score under the task's metric} of the encoder at `encoder_source` (`load()` gives its
    (encoder, tokenizer), called only on a cache miss). A kind without a probe has none, and nothing is loaded."""
    if task.kind.probe is None:
        return {}
    key = _key(task, encoder_identity(encoder_source), train, scored, max_length)
    path = default_cache_dir() / "baselines" / f"{task.name}-{key}.json"
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        pass
    encoder, tokenizer = load()
    found = probes.no_training_scores(task, encoder, tokenizer, train, scored, max_length)
    scores = {name: float(values[task.metric]) for name, values in found.items() if task.metric in values}
    try:
        write_json(path, scores)
    except WriteError as error:
        log.warning("%s: no-training baselines not cached (%s)", task.name, error)
    return scores


def best_baseline(baselines: Mapping[str, float], metric: str) -> tuple[str, float] | None:
    """The best of the baselines in the metric's direction (None without any)."""
    sign = metric_sign(metric)
    return max(baselines.items(), key=lambda item: sign * item[1]) if baselines else None


def below_floor(score: float, baselines: Mapping[str, float], metric: str) -> tuple[str, float] | None:
    """The best baseline when `score` is below it (in the metric's direction), else None."""
    best = best_baseline(baselines, metric)
    return best if best is not None and metric_sign(metric) * (score - best[1]) < 0 else None


def task_floor(trivial: float | None, baselines: Mapping[str, float], metric: str) -> dict[str, Any] | None:
    """{score, source}: the best of the trivial score and the baselines in the metric's direction (the trivial score
    wins a tie; None without either)."""
    found = {**({TRIVIAL: trivial} if trivial is not None else {}), **baselines}
    best = best_baseline(found, metric)
    return {"score": best[1], "source": best[0]} if best is not None else None


def is_below_floor(score: float, floor: Mapping[str, Any] | None, metric: str) -> bool:
    """Whether `score` fails to clear `floor`: within NEAR_TRIVIAL of it or below when the floor is the trivial score
    (a constant learns nothing), below it when the floor is a baseline."""
    if not floor:
        return False
    margin = NEAR_TRIVIAL if floor["source"] == TRIVIAL else 0.0
    return metric_sign(metric) * (score - float(floor["score"])) < margin


def floor_relation(score: float, floor: Mapping[str, Any], metric: str) -> str:
    """How a score that fails to clear its floor stands to it, in words."""
    return "below" if metric_sign(metric) * (score - float(floor["score"])) < 0 else "within a point of"


def describe_floor(name: str) -> str:
    """A baseline's name in words, for warnings and cards."""
    return PROBE_NAMES.get(name, name)
