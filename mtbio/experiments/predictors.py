"""Predictors of task transfer, by name (`mtbio affinity --predictor NAME`, `mtbio select --predictor NAME`).

A predictor is one function from a `PredictionJob` to affinity.json's content (`build_affinity`
after a joint run, `build_scores` otherwise), registered in PREDICTORS:

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
from mtbio.experiments.joint_run import joint_affinity
from mtbio.experiments.sweep import seeds_of
from mtbio.experiments.training_run import head_config_for
from mtbio.model.encoder import load_encoder, load_tokenizer, max_input_tokens
from mtbio.model.heads import build_head
from mtbio.model.multitask import MultiTaskModel
from mtbio.registry import Registry
from mtbio.reporting.affinity import build_scores
from mtbio.tasks.schema import TaskDef
from mtbio.training.affinity import cosine_matrix
from mtbio.training.config import RunConfig
from mtbio.training.task_embeddings import fisher_embedding, text_embedding


@dataclass(frozen=True)
class PredictionJob:
    """What a predictor works on: the options, the tasks, their data, and a directory of its own."""

    config: RunConfig
    tasks: list[TaskDef]
    data_dir: Path
    directory: Path
    echo: Callable[[str], None] = print


PREDICTORS: Registry[Callable[[PredictionJob], dict[str, Any]]] = Registry("transfer predictor")


def _joint(name: str) -> Callable[[PredictionJob], dict[str, Any]]:
    def predict(job: PredictionJob) -> dict[str, Any]:
        return joint_affinity(job.config, job.tasks, job.data_dir, job.directory, name, job.echo)
    return predict


PREDICTORS.register("lookahead")(_joint("lookahead"))
PREDICTORS.register("cosine")(_joint("cosine"))


def _metrics(job: PredictionJob) -> dict[str, str]:
    return {t.name: t.metric for t in job.tasks}


@PREDICTORS.register("size_ratio")
def size_ratio(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = log(n_s / n_t), n the training examples a run would use (--max-train-examples caps them)."""
    started = time.perf_counter()
    cap = job.config.max_train_examples or math.inf
    sizes = {t.name: min(split_sizes(t, job.data_dir).get("train", 0), cap) for t in job.tasks}
    empty = [name for name, n in sizes.items() if n == 0]
    if empty:
        raise MtbioError(f"size_ratio: task {', '.join(empty)} has no training examples")
    scores = {s: {t: math.log(sizes[s] / sizes[t]) for t in sizes if t != s} for s in sizes}
    return build_scores("size_ratio", "log(source training examples / target training examples)", False,
                        _metrics(job), {job.config.seed: scores}, job.config.alpha,
                        {"wall_seconds": time.perf_counter() - started}, {"train_examples": sizes})


@PREDICTORS.register("text_similarity")
def text_similarity(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = cos(mean text embedding of s, of t), over --predictor-examples training inputs each."""
    started = time.perf_counter()
    config = job.config
    encoder, tokenizer = load_encoder(config.encoder), load_tokenizer(config.encoder)
    embeddings, read = {}, 0
    for task in job.tasks:
        sample = read_split(task, "train", job.data_dir, config.predictor_examples)
        length = min(config.max_length or task.max_length, max_input_tokens(encoder))
        embeddings[task.name] = text_embedding(encoder, tokenizer, sample, length)
        read += len(sample)
    seconds = time.perf_counter() - started
    return build_scores("text_similarity", "cosine of the mean-pooled text embeddings", True, _metrics(job),
                        {config.seed: cosine_matrix(embeddings)}, config.alpha,
                        {"measure_forward_examples": read, "measure_seconds": seconds, "wall_seconds": seconds},
                        {"examples": config.predictor_examples})


@PREDICTORS.register("fisher")
def fisher(job: PredictionJob) -> dict[str, Any]:
    """score(s → t) = cos(Fisher embedding of s, of t), per seed (the head's start and the samples)."""
    started = time.perf_counter()
    config = job.config
    tokenizer, encoder = load_tokenizer(config.encoder), load_encoder(config.encoder)
    tokenizer.model_max_length = min(int(tokenizer.model_max_length), max_input_tokens(encoder))
    data = {t.name: load_task_data(t, job.data_dir, tokenizer, ["train"], config.max_train_examples,
                                   config.max_length).splits["train"] for t in job.tasks}
    scores, trained, measured, hidden = {}, 0, 0, int(encoder.config.hidden_size)
    for seed in seeds_of(config):
        embeddings = {}
        for task in job.tasks:
            torch.manual_seed(seed)
            model = MultiTaskModel(encoder, {task.name: build_head(head_config_for(task, hidden))})
            embeddings[task.name] = fisher_embedding(model, task.name, data[task.name], tokenizer.pad_token_id,
                                                     config.fisher_steps, config.batch_size,
                                                     config.predictor_examples, seed)
            trained += config.fisher_steps * min(config.batch_size, len(data[task.name]))
            measured += min(config.predictor_examples, len(data[task.name]))
        scores[seed] = cosine_matrix(embeddings)
        job.echo(f"fisher: seed {seed} measured")
    seconds = time.perf_counter() - started
    return build_scores("fisher", "cosine of the diagonal Fisher embeddings of the encoder", True, _metrics(job),
                        scores, config.alpha, {"train_examples": trained, "measure_backward_examples": measured,
                                               "measure_seconds": seconds, "wall_seconds": seconds},
                        {"examples": config.predictor_examples, "head_steps": config.fisher_steps})
