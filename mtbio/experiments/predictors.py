"""Predictors of task transfer, by name (`mtbio affinity --predictor NAME`, `mtbio select --predictor NAME`).

A predictor is one function from a `PredictionJob` to affinity.json's content (`build_affinity`
after a joint run, `build_scores` otherwise), registered in PREDICTORS with its options model
(`@register_predictor("name", options=Model)`; `job.options`, the options of `--predictor`'s mapping, which
--predictor-examples, --fisher-steps and --affinity-every, --affinity-batch-size, --affinity-split set as shorthands;
the models are in `predictor_options.py`):

- lookahead, cosine: measured during one joint refinement run per seed (`mtbio.experiments.joint_run`);
  both are kept, the name picks the one its graph shows;
- size_ratio: log(partner's training examples / target's), no training (Weller et al., 2022: pairwise
  MTL tends to help the smaller task); directed;
- text_similarity: cosine of the tasks' mean text embeddings; symmetric;
- fisher: cosine of the tasks' diagonal Fisher embeddings (Vu et al., 2020), one per seed; symmetric.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from mtbio.data.loading import read_split, split_sizes
from mtbio.data.pipeline import load_task_data
from mtbio.errors import MtbioError
from mtbio.experiments.common import train_examples_of
from mtbio.experiments.joint_run import joint_affinity
from mtbio.experiments.predictor_options import (PREDICTOR_OPTIONS, FisherOptions, JointOptions, PredictorOptions,
                                                 SampleOptions)
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import seeds_of
from mtbio.experiments.training_run import head_config_for
from mtbio.model.encoder import load_encoder, load_tokenizer, max_input_tokens
from mtbio.model.heads import build_head
from mtbio.model.multitask import MultiTaskModel
from mtbio.registry import Registry
from mtbio.reporting.affinity import build_scores
from mtbio.tasks.schema import TaskDef
from mtbio.training.affinity import cosine_matrix
from mtbio.training.task_embeddings import fisher_embedding, text_embedding


@dataclass(frozen=True)
class Predictor:
    """A registered predictor: its function and its options model."""

    run: Callable[["PredictionJob"], dict[str, Any]]
    options: type[PredictorOptions] = PredictorOptions

    def __call__(self, job: "PredictionJob") -> dict[str, Any]:
        return self.run(job)


PREDICTORS: Registry[Predictor] = Registry("transfer predictor")


def register_predictor(name: str, *, options: type[PredictorOptions] = PredictorOptions
                       ) -> Callable[[Callable[["PredictionJob"], dict[str, Any]]], Callable[["PredictionJob"], dict[str, Any]]]:
    """Register `run(job) -> affinity.json's content` as predictor `name`, with its options model (also in
    `PREDICTOR_OPTIONS`, where the shipped predictors' stand already)."""

    def decorator(run: Callable[[PredictionJob], dict[str, Any]]) -> Callable[[PredictionJob], dict[str, Any]]:
        PREDICTORS.register(name)(Predictor(run, options))
        if name not in PREDICTOR_OPTIONS:
            PREDICTOR_OPTIONS.register(name)(options)
        elif PREDICTOR_OPTIONS.get(name) is not options:
            raise ValueError(f"transfer predictor '{name}' has the options model {PREDICTOR_OPTIONS.get(name).__name__}")
        return run

    return decorator


@dataclass(frozen=True)
class PredictionJob:
    """What a predictor works on: the options, the tasks, their data, and a directory of its own."""

    config: StudyConfig
    tasks: list[TaskDef]
    data_dir: Path
    directory: Path
    echo: Callable[[str], None] = print

    @property
    def options(self) -> Any:
        """The options of `config.predictor`."""
        return self.config.predictor_spec()[1]


def _joint(name: str) -> Callable[[PredictionJob], dict[str, Any]]:
    def predict(job: PredictionJob) -> dict[str, Any]:
        return joint_affinity(job.config, job.tasks, job.data_dir, job.directory, name, job.echo)
    return predict


register_predictor("lookahead", options=JointOptions)(_joint("lookahead"))
register_predictor("cosine", options=JointOptions)(_joint("cosine"))


def _metrics(job: PredictionJob) -> dict[str, str]:
    return {t.name: t.metric for t in job.tasks}


@register_predictor("size_ratio")
def size_ratio(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = log(n_s / n_t), n the training examples a run would use (--max-train-examples and
    --task-examples cap them)."""
    started = time.perf_counter()
    sizes = {t.name: min(split_sizes(t, job.data_dir).get("train", 0), train_examples_of(job.config, t.name) or math.inf)
             for t in job.tasks}
    empty = [name for name, n in sizes.items() if n == 0]
    if empty:
        raise MtbioError(f"size_ratio: task {', '.join(empty)} has no training examples")
    scores = {s: {t: math.log(sizes[s] / sizes[t]) for t in sizes if t != s} for s in sizes}
    return build_scores("size_ratio", "log(source training examples / target training examples)", False,
                        _metrics(job), {job.config.seed: scores}, job.config.rule_spec()[1].alpha,
                        {"wall_seconds": time.perf_counter() - started}, {"train_examples": sizes})


@register_predictor("same_type")
def same_type(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = 1 when s and t are of the same task type (kind, and one text or a pair), else 0: the free
    rule a predictor that costs training must beat."""
    from mtbio.data.readers import is_pair_task

    started = time.perf_counter()
    kinds = {t.name: f"{t.type}{' pair' if is_pair_task(t) else ''}" for t in job.tasks}
    scores = {s: {t: float(kinds[s] == kinds[t]) for t in kinds if t != s} for s in kinds}
    return build_scores("same_type", "1 when the two tasks are of the same type (kind; one text or a pair), else 0",
                        True, _metrics(job), {job.config.seed: scores}, job.config.rule_spec()[1].alpha,
                        {"wall_seconds": time.perf_counter() - started}, {"types": kinds})


@register_predictor("text_similarity", options=SampleOptions)
def text_similarity(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = cos(mean text embedding of s, of t), over --predictor-examples training inputs each."""
    started = time.perf_counter()
    config, examples = job.config, job.options.examples
    encoder, tokenizer = load_encoder(config.encoder), load_tokenizer(config.encoder)
    embeddings, read = {}, 0
    for task in job.tasks:
        sample = read_split(task, "train", job.data_dir, examples)
        length = min(config.max_length or task.max_length, max_input_tokens(encoder))
        embeddings[task.name] = text_embedding(encoder, tokenizer, sample, length)
        read += len(sample)
    seconds = time.perf_counter() - started
    return build_scores("text_similarity", "cosine of the mean-pooled text embeddings", True, _metrics(job),
                        {config.seed: cosine_matrix(embeddings)}, config.rule_spec()[1].alpha,
                        {"measure_forward_examples": read, "measure_seconds": seconds, "wall_seconds": seconds},
                        {"examples": examples})


@register_predictor("fisher", options=FisherOptions)
def fisher(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = cos(Fisher embedding of s, of t), per seed (the head's start and the samples)."""
    started = time.perf_counter()
    config, options = job.config, job.options
    tokenizer, encoder = load_tokenizer(config.encoder), load_encoder(config.encoder)
    tokenizer.model_max_length = min(int(tokenizer.model_max_length), max_input_tokens(encoder))
    data = {t.name: load_task_data(t, job.data_dir, tokenizer, ["train"], train_examples_of(config, t.name),
                                   config.max_length).splits["train"] for t in job.tasks}
    scores, trained, measured, hidden = {}, 0, 0, int(encoder.config.hidden_size)
    for seed in seeds_of(config):
        embeddings = {}
        for task in job.tasks:
            torch.manual_seed(seed)
            model = MultiTaskModel(encoder, {task.name: build_head(head_config_for(task, hidden, encoder.config))})
            embeddings[task.name] = fisher_embedding(model, task.name, data[task.name], tokenizer.pad_token_id,
                                                     options.head_steps, config.batch_size,
                                                     options.examples, seed)
            trained += options.head_steps * min(config.batch_size, len(data[task.name]))
            measured += min(options.examples, len(data[task.name]))
        scores[seed] = cosine_matrix(embeddings)
        job.echo(f"fisher: seed {seed} measured")
    seconds = time.perf_counter() - started
    return build_scores("fisher", "cosine of the diagonal Fisher embeddings of the encoder", True, _metrics(job),
                        scores, config.rule_spec()[1].alpha, {"train_examples": trained, "measure_backward_examples": measured,
                                               "measure_seconds": seconds, "wall_seconds": seconds},
                        {"examples": options.examples, "head_steps": options.head_steps})
