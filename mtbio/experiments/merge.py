"""`mtbio merge`: fine-tuned runs' encoders merged into one encoder that carries every run's heads, written as a
run directory that `mtbio evaluate`, `predict` and `export` take.

Each run contributes its task vector, its fine-tuned encoder minus the base encoder it started from (a LoRA
run: one per task, its adapter merged into the base). The merge is PEFT's (`peft.utils.merge_utils`), applied
parameter by parameter: `ties` (trim to the largest `density` of each vector, elect the sign, average the agreeing
entries; weights 1), `dare_linear` (drop entries at random, keep `density` of them rescaled, weighted sum; weights
1/n). `average` is plain weight averaging of the fine-tuned encoders. The base + merged task vector is the encoder.

`--with-start α` (`interpolate_run`) moves one run's encoder back toward the encoder it started from instead, keeping
its heads: θ = (1 − α)·θ_start + α·θ_run (WiSE-FT, Wortsman et al. 2022; LM-Cocktail does the same for embedders).
Where the task vectors of a parameter are all equal (a run given twice), there is no interference for trimming,
sign election or drops to resolve: the parameter is that vector, weighted as the method weighs agreeing entries.
The merged run is assembled beside `output` and renamed into place whole (`staged_output`, as `export` does).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.fileio import staged_output
from mtbio.experiments.training_run import write_task_defs
from mtbio.model.adapters import merged_state_dict
from mtbio.model.encoder import load_encoder, resolve_encoder_name
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.persist import load_model, save_model
from mtbio.run_dir import RunDir
from mtbio.tasks.loading import load_run_tasks

METHODS = ("ties", "dare_linear", "average")


def base_encoder_source(run_dirs: Sequence[Path]) -> str | None:
    """The encoder every run started from (results.json's `encoder_source`); runs from different ones are refused."""
    sources = {RunDir(run).results().get("encoder_source"): run for run in run_dirs}
    if len({_resolved(source) for source in sources}) != 1:
        listed = "; ".join(f"{run}: {source or 'the packaged MiniLM-L6'}" for source, run in sources.items())
        raise MtbioError(f"the runs started from different encoders ({listed}); merge runs of one base, or give --base")
    return next(iter(sources))


def _resolved(source: str | None) -> str:
    name = resolve_encoder_name(source)
    return str(Path(name).resolve()) if Path(name).exists() else name


def fine_tuned_encoders(run_dirs: Sequence[Path]) -> tuple[dict[Path, list[dict[str, Any]]], dict[str, Any],
                                                            list[Any], Any]:
    """Per run (resolved path), its fine-tuned encoder's weights (a LoRA run: one per task, its adapter merged into
    the base); every task's head and definition; the first run's tokenizer. A run given twice is read once."""
    states: dict[Path, list[dict[str, Any]]] = {}
    heads: dict[str, Any] = {}
    tasks: list[Any] = []
    tokenizer = None
    for run_dir in dict.fromkeys(Path(p).resolve() for p in run_dirs):
        model, run_tokenizer = load_model(run_dir)
        tokenizer = tokenizer or run_tokenizer
        definitions = load_run_tasks(run_dir)
        for name, head in model.heads.items():
            if name in heads:
                raise MtbioError(f"task '{name}' is in more than one run ({run_dir}); merge runs of different tasks")
            heads[name] = head
            tasks.append(definitions[name])
        states[run_dir] = ([merged_state_dict(model.encoder, task) for task in model.adapters] if model.adapters
                           else [model.encoder.state_dict()])
    return states, heads, tasks, tokenizer


def merge_tensors(method: str, base: Any, tuned: list[Any], weights: Sequence[float], density: float) -> Any:
    """One parameter merged: `average` of the fine-tuned tensors, or base + PEFT's `ties`/`dare_linear` of the
    task tensors (fine-tuned − base)."""
    import torch
    from peft.utils import merge_utils

    factors = torch.tensor(list(weights), dtype=base.dtype, device=base.device)
    if method == "average":
        return (torch.stack(tuned) * factors.view(-1, *[1] * base.ndim)).sum(0) / factors.sum()
    vectors = [t - base for t in tuned]
    if all(torch.equal(vectors[0], v) for v in vectors[1:]):  # one vector, however often given: nothing to resolve
        return base + (factors.mean() if method == "ties" else factors.sum()) * vectors[0]
    merge = {"ties": merge_utils.ties, "dare_linear": merge_utils.dare_linear}[method]
    return base + merge(vectors, factors, density)


def merge_runs(run_dirs: Sequence[Path], method: str, output: Path, density: float = 0.5,
               weights: Sequence[float] | None = None, base: str | None = None, seed: int | None = None) -> Path:
    """Merge the runs' encoders (see the module docstring) into the run directory `output`; returns it.
    `weights`: one per task vector (default: 1 for ties, 1/n for dare_linear, equal for average); `base`: the
    encoder the runs started from (default: their results.json's `encoder_source`); `seed`: dare's random drops
    and the merged run's seed in tables (default: the runs' own seed when they share one, else 42)."""
    import torch

    if method not in METHODS:
        raise MtbioError(f"--method {method}: one of {', '.join(METHODS)}")
    if not 0 < density <= 1:
        raise MtbioError(f"--density {density}: the fraction of each task vector kept, in (0, 1]")
    run_dirs = [Path(p) for p in run_dirs]
    _refuse_filled(output)
    source = base or base_encoder_source(run_dirs)
    encoder = load_encoder(source)
    # a run given n times is n equal task vectors (merge_tensors: merging a run with itself gives the run back)
    states, heads, tasks, tokenizer = fine_tuned_encoders(run_dirs)
    tuned = [(run, state) for run in run_dirs for state in states[run.resolve()]]
    if len(tuned) < 2:
        raise MtbioError("merge takes two task vectors or more (two runs, or a LoRA run with several tasks)")
    weights = list(weights) if weights else [1.0 if method == "ties" else 1.0 / len(tuned)] * len(tuned)
    if len(weights) != len(tuned):
        raise MtbioError(f"--weights: {len(weights)} given for {len(tuned)} task vectors (one per run; a LoRA run "
                         "has one per task)")
    base_state = encoder.state_dict()
    for run, state in tuned:
        _check_fits(run, state, base_state, source)
    if seed is None:
        shared = {RunDir(run).config().get("seed") for run in run_dirs}
        seed = int(shared.pop()) if len(shared) == 1 and None not in shared else 42
    torch.manual_seed(seed)
    merged = {name: merge_tensors(method, value, [state[name] for _, state in tuned], weights, density)
              if value.is_floating_point() else value for name, value in base_state.items()}
    encoder.load_state_dict(merged)
    _write_merged(encoder, heads, tasks, tokenizer, output, {
        "encoder_source": source, "merged_from": [str(p) for p in run_dirs], "method": method, "density": density,
        "weights": weights, "seed": seed})
    return output


def interpolate_run(run_dir: Path, alpha: float, output: Path, base: str | None = None) -> Path:
    """The run's encoder interpolated toward the encoder it started from, θ = (1 − α)·θ_start + α·θ_run (α = 0: the
    start's weights, 1: the run's, both exactly), with the run's heads, written as the run directory `output`;
    returns it. `base`: the start (default: the run's results.json's `encoder_source`, the packaged MiniLM or the
    `--from` run's encoder)."""
    if not 0 <= alpha <= 1:
        raise MtbioError(f"--with-start {alpha}: the run's share of the encoder, in [0, 1] (0: the encoder it started "
                         "from, 1: its own)")
    run_dir = Path(run_dir)
    _refuse_filled(output)
    source = base or base_encoder_source([run_dir])
    encoder = load_encoder(source)
    states, heads, tasks, tokenizer = fine_tuned_encoders([run_dir])
    state = states[run_dir.resolve()]
    if len(state) != 1:
        raise MtbioError(f"--with-start: {run_dir} is a LoRA run with an encoder per task ({', '.join(heads)}); "
                         "interpolate a run with one encoder")
    refined, start = state[0], encoder.state_dict()
    _check_fits(run_dir, refined, start, source)
    encoder.load_state_dict({name: (1 - alpha) * value + alpha * refined[name] if value.is_floating_point()
                             else refined[name] for name, value in start.items()})
    _write_merged(encoder, heads, tasks, tokenizer, output, {
        "encoder_source": source, "merged_from": [str(run_dir)], "method": "with-start", "alpha": alpha,
        "seed": RunDir(run_dir).config().get("seed")})
    return output


def _refuse_filled(output: Path) -> None:
    if output.exists() and any(output.iterdir()):
        raise MtbioError(f"--output {output}: not empty; choose a new directory for the merged run")


def _check_fits(run: Path, state: dict[str, Any], base_state: dict[str, Any], source: str | None) -> None:
    """Refuse a run whose encoder's weights are not the base encoder's names and shapes."""
    if set(state) != set(base_state) or any(state[k].shape != v.shape for k, v in base_state.items()):
        raise MtbioError(f"{run}: its encoder's weights do not match the base encoder "
                         f"{source or 'the packaged MiniLM-L6'} (names or shapes differ); merge runs fine-tuned "
                         "from that encoder, or give --base")


def _write_merged(encoder: Any, heads: dict[str, Any], tasks: list[Any], tokenizer: Any, output: Path,
                  record: dict[str, Any]) -> None:
    """The merged encoder with the heads, the tasks' definitions and results.json (`record` + stage, tasks),
    assembled beside `output` and renamed into place whole."""
    with staged_output(output, "mtbio merge", failed="the merged run was not written and nothing partial is left"
                       ) as stage:
        save_model(MultiTaskModel(encoder, heads), tokenizer, stage)
        write_task_defs(tasks, RunDir(stage).tasks_dir)
        RunDir(stage).write_results({"stage": "merge", "tasks": [t.name for t in tasks], **record, "dev": {},
                                     "test": {}})


def score_merged(run_dir: Path, splits: Sequence[str], data_dir: Path | None) -> dict[str, Any]:
    """Score a merged run on `splits` and record the scores in its results.json (as a trained run records
    them), so `report` tables it beside trained runs; returns {split: {task: scores}}."""
    from mtbio.experiments.evaluate import evaluate_paths

    if not splits:
        return {}
    run = RunDir(run_dir)
    results = run.results()
    for split in splits:
        [row] = evaluate_paths([run_dir], split, data_dir)["rows"]
        results[split] = row["scores"]
    run.write_results(results)
    return {split: results[split] for split in splits}
