"""One training run, shared by refine (several tasks) and finetune (one task): build the model,
train it, keep the best dev weights, score test once if asked, and write the run directory.

    <run_dir>/
        encoder/            best-dev encoder + tokenizer (plain HF `save_pretrained`)
        heads/<task>/       head_config.json + model.safetensors (+ adapter/: the task's LoRA adapter with
                            --adapter lora, PEFT's format; encoder/ is then the frozen base encoder)
        tasks/<task>.yml    the resolved task definitions
        config.yaml         the resolved run config
        data.json           the data files read, per task and split (size, time, content hash): --resume checks them
        metrics.jsonl       one line per evaluation, and training curves every --log-every steps
        run.log             the run's log lines (truncation, packing, resume point, warnings)
        results.json        final scores, stage, throughput
        checkpoints/        resumable training state (safetensors + JSON)
"""
from __future__ import annotations

import itertools
import logging
import resource
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from collections.abc import Iterator, Sequence
from typing import Any

import yaml
from accelerate import Accelerator
from accelerate.utils import set_seed

from mtbio.data.featurize import effective_max_length
from mtbio.data.loading import read_split
from mtbio.data.pipeline import TaskData, load_task_data
from mtbio.data.split_cache import file_records
from mtbio.errors import MtbioError
from mtbio.experiments.common import train_examples_of
from mtbio.evaluation.trivial import trivial_score
from mtbio.fileio import make_dir, write_json, write_text, writing
from mtbio.logs import RunLogHandler, run_log
from mtbio.model.adapters import ADAPTER_DIR, add_adapter, load_adapter
from mtbio.model.encoder import (default_encoder_path, load_encoder, load_tokenizer, max_input_tokens,
                                 sentence_pooling)
from mtbio.model.floor import TRIVIAL, describe_floor, floor_relation, is_below_floor, no_training_baselines, task_floor
from mtbio.model.heads import HeadConfig, build_head
from mtbio.model.heads.blocks import block_spec
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.pair_form import MAX_EXAMPLES as PROBE_EXAMPLES
from mtbio.model.probes import PROBE_POOLING
from mtbio.model.pair_form import choose_pair_form, pair_form, probe_scores, with_pair_form
from mtbio.model.persist import load_head, load_model, read_head_config, save_model
from mtbio.model.poolings import POOLINGS
from mtbio.model.weightings import build_weighting
from mtbio.tasks.kinds import task_kind
from mtbio.tasks.loading import is_dataset_split, require_all_data, require_data, split_paths
from mtbio.tasks.schema import TaskDef
from mtbio.training.checkpoint import list_checkpoints
from mtbio.training.config import (RunConfig, fixed_on_resume, flat_fields, flat_values, run_options, save_config,
                                   upgrade_retired)
from mtbio.run_dir import BEST_DIR, RunDir
from mtbio.training.lp_start import fit_heads
from mtbio.training.per_task import PerTaskBest
from mtbio.training.stabilize import apply_layer_options
from mtbio.training.events import EvaluateStart, Listener
from mtbio.training.flops import machine_key, useful_flops
from mtbio.training.trainer import Trainer, TrainerOptions, make_accelerator, steady_throughput

log = logging.getLogger(__name__)

STAGES = ("refine", "finetune", "single-task")


def head_config_for(task: TaskDef, hidden_size: int, encoder_config: Any = None) -> HeadConfig:
    """A new head's config; a kind exported as an `AutoModelFor*` trains the encoder family's classifier block."""
    export = task.kind.export
    exported = export is not None and export.layout == "transformers"
    return HeadConfig(task=task.name, type=task.type, hidden_size=hidden_size, labels=task.label_list,
                      dropout=task.dropout, threshold=task.threshold, loss_weight=task.loss_weight,
                      pooling=task.pooling, type_options=dict(task.type_options),
                      negative=task.negative_label or "" if task.metric == "micro_f1" else "",
                      sliding_window=task.sliding_window.model_dump() if task.sliding_window is not None else {},
                      block=block_spec(encoder_config) if exported and encoder_config is not None else {})


def cost_record(encoder_config: Any, state: Any, entered: float, started: float) -> dict[str, Any]:
    """What the run cost (results.json): when it ran, where its time went (setup: reading, featurizing and
    loading before the first step; train, evaluate and save summed over the run, resumes included), its useful
    FLOPs (real tokens; `mtbio.training.flops`), this process's peak resident memory so far, and where it ran
    (torch, threads, device, CPU model and vector flags: float results differ between CPU kinds and thread counts)."""
    try:
        flops: dict[str, float] | None = {
            "train": useful_flops(encoder_config, state.tokens_seen, state.token_squares_seen, training=True),
            "evaluate": useful_flops(encoder_config, state.eval_tokens, state.eval_token_squares, training=False)}
    except AttributeError:  # an encoder config without BERT's size fields
        flops = None
    return {"started_at": entered, "finished_at": time.time(),
            "phase_seconds": {"setup": started - entered, "train": state.train_seconds,
                              "evaluate": state.eval_seconds, "save": state.save_seconds},
            "useful_flops": flops, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "machine": machine_key()}


SETUP_FILES = {"config.yaml", "data.json", "tasks", "run.log"}  # what a run writes before its first step


def check_run_dir(run_dir: Path, resume: bool) -> None:
    """Refuse to silently overwrite a finished or interrupted run. A directory holding only what a run
    writes before its first step (a run that failed while starting) is not a run: it is reused."""
    if not run_dir.exists() or resume:
        return
    present = {p.name for p in run_dir.iterdir()} - {RunDir.LOCK}
    if present and not (present <= SETUP_FILES and _saved_config(run_dir) is not None):
        raise MtbioError(f"{run_dir} already holds a run; pass --resume to continue it or choose another --output")
    if present:
        log.info("%s: replacing the files of a run that stopped before its first step", run_dir)


def _saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config.yaml as written by mtbio (every key a run option), else None."""
    try:
        saved = yaml.safe_load(RunDir(run_dir).config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(saved, dict):
        return None
    saved = flat_values(upgrade_retired(saved), RunConfig)  # a run written before its components owned their options
    return saved if set(saved) == set(flat_fields(RunConfig)) else None


def check_resume(run_dir: Path, config: RunConfig, tasks: Sequence[TaskDef] = (),
                 data: dict[str, Any] | None = None) -> None:
    """Before anything is written: refuse a --resume whose options differ from those the checkpoint
    was trained with (it would continue with the checkpoint's optimizer, schedule and batch plan while
    config.yaml recorded the new ones), whose task definitions differ from the run's `tasks/*.yml`
    (labels, columns, files, lengths, kind options: the checkpoint's heads were trained on those), or whose
    data files (`data`, a `data_record`) differ from those recorded in data.json. Run length, evaluation and
    logging options may change."""
    if not config.resume or not list_checkpoints(RunDir(run_dir).checkpoints_dir):
        return
    for task in tasks:
        _check_same_task(run_dir, task)
    if data is not None:
        _check_same_data(run_dir, data)
    saved = _saved_config(run_dir)
    if saved is None:
        raise MtbioError(f"{run_dir}: --resume needs the run's config.yaml to check the options against")
    requested = flat_values(config.model_dump(), RunConfig)
    for name in fixed_on_resume():
        if saved[name] != requested[name]:
            flag = "--" + name.replace("_", "-")
            raise MtbioError(f"--resume: {flag} is {requested[name]!r} but {run_dir} was trained with "
                             f"{saved[name]!r}; a resumed run keeps its options (drop {flag}, or give the "
                             "run's value, or choose another --output)")


@contextmanager
def untouched_rng() -> Iterator[None]:
    """Run the block and put back the random generators' states (torch's CPU one, numpy's, Python's) as they were."""
    import random

    import numpy as np
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    random.setstate(python_state)
    np.random.set_state(numpy_state)


def recipe_options(config: RunConfig) -> list[str]:
    """The options the run's recipe sets (empty for a recipe that cannot be read here)."""
    from mtbio.training.recipes import recipe_values

    try:
        return [key.replace("-", "_") for key in recipe_values(config.recipe)
                if key.replace("-", "_") in flat_fields(RunConfig)]
    except MtbioError:
        return []


def resolve_pooling(task: TaskDef, choice: str, encoder_source: str | None, heads_source: Path | None,
                    lp_ft: bool = False) -> TaskDef:
    """`task` with the pooling `--pooling` asks for (its sentence-level head's input; other kinds as they are). Under
    LP-FT (task or auto) a new head reads what its probe read (`PROBE_POOLING`), so its start is that probe, and a
    head that starts from a saved one reads what that one read."""
    saved = heads_source / task.name if heads_source is not None else None
    fresh = saved is None or not saved.is_dir()
    if choice == "task" and not lp_ft:
        return task
    pooling = choice
    if choice in ("task", "auto") and lp_ft:
        pooling = PROBE_POOLING if fresh else read_head_config(saved).pooling  # type: ignore[arg-type]
    elif choice == "auto":
        pooling = (read_head_config(saved).pooling if saved is not None and not fresh
                   else sentence_pooling(encoder_source) or task.pooling)
    return task if pooling == task.pooling else task.kind.with_pooling(task, pooling)


# run options that do something only for some tasks: what each applies to, and whether it applies to a run's tasks
TASK_OPTIONS: dict[str, tuple[str, Any]] = {
    "pair_form": ("classifications of two texts", lambda tasks: any(pair_form(t) is not None for t in tasks)),
    "pooling": ("heads that read one pooled position (not tagging, span or bi-encoder heads)",
                lambda tasks: any(t.kind.pools for t in tasks)),
    "select_by": ("joint runs of two or more tasks", lambda tasks: len(tasks) > 1),
}


def without_inapplicable(config: RunConfig, tasks: Sequence[TaskDef]) -> RunConfig:
    """`config` with each option in TASK_OPTIONS that applies to none of `tasks` put back to the value the run has
    without it (its recipe's, else the option's default), with a warning naming it: config.yaml then records what
    the run applied, and a --resume given the same flag compares equal. The option's default (each task's own, one
    selection) is never warned about."""
    from mtbio.training.recipes import recipe_values

    try:
        recipe = {key.replace("-", "_"): value for key, value in recipe_values(config.recipe).items()}
    except MtbioError:
        recipe = {}
    names = ", ".join(f"{t.name} ({t.type})" for t in tasks)
    reset = {}
    for name, (what, applies) in TASK_OPTIONS.items():
        default = RunConfig.model_fields[name].default
        inert = recipe.get(name, default)
        if getattr(config, name) in (inert, default) or applies(tasks):
            continue
        extra: Any = RunConfig.model_fields[name].json_schema_extra or {}
        flag = extra.get("flag") or "--" + name.replace("_", "-")
        log.warning("%s %s does nothing here: it applies to %s, and this run trains %s; ignored (config.yaml records "
                    "%s)", flag, getattr(config, name), what, names, inert)
        reset[name] = inert
    return config.model_copy(update=reset) if reset else config


def resolve_pair_forms(tasks: list[TaskDef], config: RunConfig, encoder: Any, tokenizer: Any, data_dir: Path | None,
                       heads_source: Path | None, encoder_source: str | None
                       ) -> tuple[list[TaskDef], dict[str, dict[str, Any]]]:
    """The tasks with the pair form `--pair-form` asks for (a task whose head starts from a saved one keeps that
    head's form; other kinds as they are), and per pair task the form and what chose it. Under `auto` a
    cross-encoder's head reads what its probe read: the encoder's sentence pooling, else the mean."""
    resolved, chosen = [], {}
    for task in tasks:
        own = pair_form(task)
        if config.pair_form == "task" or own is None:
            resolved.append(task)
            continue
        saved = heads_source / task.name if heads_source is not None else None
        form, scores, reason = config.pair_form, {}, f"--pair-form {config.pair_form}"
        pooling = None
        if saved is not None and saved.is_dir():
            form, reason = task_kind(read_head_config(saved).type).pair_form or own, f"the head in {saved}"
        elif form == "auto":
            require_data(task, data_dir)
            assert data_dir is not None
            train = read_split(task, "train", data_dir, train_examples_of(config, task.name))
            pooling = PROBE_POOLING  # what the cross form's probe reads
            with untouched_rng():
                scores = probe_scores(task, encoder, tokenizer, train,
                                      effective_max_length(task, tokenizer, config.max_length), pooling)
            form = choose_pair_form(task, scores)
            log.info("%s: pair form %s (linear probes on the frozen encoder, 5-fold on %d training examples: cross "
                     "(%s pooling) %s, bi %s, trivial %s)", task.name, form, min(len(train), PROBE_EXAMPLES), pooling,
                     *(f"{scores[k]:.4f}" if scores[k] is not None else "–" for k in ("cross", "bi", "trivial")))
            reason = ("auto: the better linear probe in 5-fold cross-validation on the training examples, if above "
                      "the trivial score")
        resolved.append(with_pair_form(task, form, pooling))
        chosen[task.name] = {"form": form, "by": reason, "probes": scores}
    return resolved, chosen


def _check_same_task(run_dir: Path, task: TaskDef) -> None:
    """Refuse a resume whose definition of `task` is not the one the run was trained with."""
    path = RunDir(run_dir).tasks_dir / f"{task.name}.yml"
    try:
        saved = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raise MtbioError(f"{path}: --resume needs the run's copy of task '{task.name}' to check its definition "
                         "against") from None
    now = task.model_dump(mode="json")
    changed = [key for key in dict.fromkeys([*now, *saved]) if saved.get(key) != now.get(key)]
    if changed:
        key = changed[0]
        raise MtbioError(f"--resume: task '{task.name}' has changed since {run_dir} was trained ({key}: "
                         f"{saved.get(key)!r} then, {now.get(key)!r} now; {path} holds the run's copy); "
                         "restore the definition, or start a new run with another --output")


def data_record(tasks: Sequence[TaskDef], splits: Sequence[str], data_dir: Path | None) -> dict[str, Any]:
    """Per task and split, the data files the run reads (`file_records`: path, size, time, content hash); a split
    of a `datasets` dataset has none."""
    assert data_dir is not None  # every task's files were checked by require_all_data before the run began
    record: dict[str, Any] = {}
    for task in tasks:
        record[task.name] = {split: file_records(p for p in split_paths(task, split, data_dir)
                                                 if not is_dataset_split(p))
                             for split in splits if split in task.has_splits}
    return record


def _check_same_data(run_dir: Path, data: dict[str, Any]) -> None:
    """Refuse a resume whose data files are not those data.json says the run was trained on (by content)."""
    saved = RunDir(run_dir).data_files()
    for task, splits in data.items():
        for split, files in splits.items():
            then = saved.get(task, {}).get(split)
            if then is None:  # a run written before runs kept a record, or a split it did not read
                continue
            for old, new in itertools.zip_longest(then, files):
                if old is not None and new is not None and old["sha256"] == new["sha256"]:
                    continue
                if old is None or new is None:
                    what = f"{new['file']} is new" if old is None else f"{old['file']} is gone"
                else:
                    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(new["mtime"]))
                    what = (f"{new['file']} has changed (size {old['size']} bytes then, {new['size']} now; "
                            f"modified {stamp})")
                raise MtbioError(f"--resume: task '{task}' {split} data: {what} since {run_dir} was trained on it; "
                                 "its checkpoints learned from the old contents: restore the file, or start a new "
                                 "run with another --output")


def _floors(tasks: list[TaskDef], data: dict[str, TaskData], encoder_source: str | None, tokenizer: Any,
            config: RunConfig) -> dict[str, dict[str, float]]:
    """Each task's no-training baselines of the start encoder (loaded again, once, on a cache miss: the run's own is
    changed by layer options and adapters) on the run's training subset and dev split."""
    source = encoder_source or default_encoder_path()
    loaded: list[Any] = []

    def load() -> tuple[Any, Any]:
        if not loaded:
            loaded.append(load_encoder(source).eval())
        return loaded[0], tokenizer

    return {task.name: no_training_baselines(task, source, load, data[task.name].splits["train"].examples,
                                             data[task.name].splits["dev"].examples,
                                             effective_max_length(task, tokenizer, config.max_length))
            for task in tasks}


def write_task_defs(tasks: list[TaskDef], directory: Path) -> None:
    for task in tasks:
        write_text(directory / f"{task.name}.yml", yaml.safe_dump(task.model_dump(mode="json"), sort_keys=False))


def train_tasks(
    tasks: list[TaskDef],
    config: RunConfig,
    run_dir: Path,
    encoder_source: str | None,
    lr: float,
    stage: str,
    data_dir: Path | None,
    heads_source: Path | None = None,
    listeners: Sequence[Listener] = (),
) -> dict[str, Any]:
    """Train `tasks` jointly from `encoder_source`; return (and write) results.json's content.
    `listeners` hear the training loop's events (`mtbio.training.events`).

    `heads_source`: a run's `heads/` directory; a task with a head there starts from it (it must
    have been trained with the same labels), the others get new heads.

    The `mtbio` logger's INFO lines of the run (truncation, packing, resume point, skipped batches,
    warnings) go to `run_dir/run.log` too."""
    with run_log() as log_file:
        entered = time.time()
        accelerator = make_accelerator(config.mixed_precision, config.report_to, run_dir)
        # one training process per directory: two writing the same run would corrupt each other's checkpoints
        with RunDir(run_dir).held() if accelerator.is_main_process else nullcontext():
            return _train_tasks(tasks, config, run_dir, encoder_source, lr, stage, data_dir, log_file, heads_source,
                                listeners, accelerator, entered)


def build_heads(tasks: list[TaskDef], encoder_config: Any, heads_source: Path | None) -> dict[str, Any]:
    """A head per task: the one saved under `heads_source/<task>/` where there is one, else a new one."""
    heads, hidden = {}, int(encoder_config.hidden_size)
    for task in tasks:
        saved = heads_source / task.name if heads_source is not None else None
        if saved is None or not saved.is_dir():
            heads[task.name] = build_head(head_config_for(task, hidden, encoder_config))
            continue
        trained, wanted = read_head_config(saved), head_config_for(task, hidden, encoder_config)
        if (trained.type, trained.labels) != (wanted.type, wanted.labels):
            raise MtbioError(f"{saved}: head trained as {trained.type} over labels {trained.labels}, the task now has "
                             f"{wanted.type} over {wanted.labels}; pass --finetune-heads new")
        if trained.pooling != wanted.pooling:
            raise MtbioError(f"{saved}: head trained reading pooling {trained.pooling}, the task now reads "
                             f"{wanted.pooling}; pass --pooling {trained.pooling} (or auto), or --finetune-heads new")
        heads[task.name] = load_head(saved, hidden)
        log.info("%s: head starts from %s", task.name, saved)
    return heads


def _load_saved(trainer: Trainer, source: Path, names: list[str]) -> None:
    """Put the weights saved in `source` (encoder and the heads of `names`; a weighting is not saved there) into the
    trainer's model, with each head's config: a fitted decision rule is saved there."""
    best, _ = load_model(source, names)
    trainer.unwrapped.encoder.load_state_dict(best.encoder.state_dict())
    for name in names:
        trainer.unwrapped.heads[name].load_state_dict(best.heads[name].state_dict())
        trainer.unwrapped.heads[name].config = best.heads[name].config


def _per_task_best(per_task: PerTaskBest, trainer: Trainer, tasks: list[TaskDef], config: RunConfig, run_dir: Path,
                   stage: str, encoder_source: str | None, trivial: dict[str, float],
                   floors: dict[str, Any]) -> None:
    """Make each `best/<task>/` a one-task run directory (its task, config and results: the task's own best dev
    evaluation, the run's length, the task's trivial score and floor and whether these weights clear it, and with
    --eval-test its test scored once with those weights)."""
    for task in tasks:
        found = per_task.best.get(task.name)
        if found is None:
            continue
        own = run_dir / BEST_DIR / task.name
        if config.eval_test:
            _load_saved(trainer, own, [task.name])
        test = trainer.evaluate("test", [task.name]) if config.eval_test else {}
        if trainer.accelerator.is_main_process:
            write_task_defs([task], RunDir(own).tasks_dir)
            save_config(config.model_copy(update={"tasks": [task.name]}), RunDir(own).config_file)
            RunDir(own).write_results({"stage": stage, "tasks": [task.name], "encoder_source": encoder_source,
                                       "selected": "per-task", "joint_run": str(run_dir), "best_step": found["step"],
                                       "steps": trainer.state.global_step, "dev": {task.name: found["dev"]},
                                       "test": test, "trivial": {task.name: trivial[task.name]},
                                       "floor": {task.name: floors[task.name]},
                                       "below_floor": [task.name] if is_below_floor(
                                           found["dev"][task.metric], floors[task.name], task.metric) else []})


def build_adapters(tasks: list[TaskDef], encoder: Any, config: RunConfig, heads_source: Path | None) -> tuple[str, ...]:
    """With an --adapter (lora), an adapter per task in `encoder` (frozen), made from the adapter's PEFT config: the
    one saved under `heads_source/<task>/adapter/` where the heads start from an adapter run, else a new one. Returns
    the adapted tasks."""
    saved = {t.name: heads_source / t.name / ADAPTER_DIR for t in tasks} if heads_source is not None else {}
    saved = {name: path for name, path in saved.items() if path.is_dir()}
    peft_config = config.adapter_spec()[1].peft_config(encoder)
    if peft_config is None:
        if saved and heads_source is not None:
            raise MtbioError(f"{heads_source.parent}: a LoRA run (its encoder is the base the adapters apply to); "
                             "fine-tune it with --adapter lora")
        return ()
    for task in tasks:
        if task.name in saved:
            load_adapter(encoder, task.name, saved[task.name], peft_config)
            log.info("%s: adapter starts from %s", task.name, saved[task.name])
        else:
            add_adapter(encoder, task.name, peft_config)
    return tuple(t.name for t in tasks)


def _train_tasks(tasks: list[TaskDef], config: RunConfig, run_dir: Path, encoder_source: str | None, lr: float,
                 stage: str, data_dir: Path | None, log_file: RunLogHandler,
                 heads_source: Path | None,
                 listeners: Sequence[Listener], accelerator: Accelerator, entered: float) -> dict[str, Any]:
    config = config.model_copy(update={"mixed_precision": str(accelerator.mixed_precision)})  # as resolved
    require_all_data(tasks, data_dir)  # before the recipe and pooling lines: a missing file is the first thing said
    log.info("recipe %s: %s", config.recipe, ", ".join(f"{key} {getattr(config, key)}" for key in recipe_options(config)))
    check_run_dir(run_dir, config.resume)
    tokenizer = load_tokenizer(encoder_source)
    encoder = load_encoder(encoder_source)
    tasks, pair_forms = resolve_pair_forms(tasks, config, encoder, tokenizer, data_dir, heads_source, encoder_source)
    tasks = [resolve_pooling(t, config.pooling, encoder_source, heads_source, config.lp_ft)
             for t in tasks]
    for task in (t for t in tasks if t.kind.pools):
        log.info("%s: its head reads pooling %s", task.name, task.pooling)
    if config.pooling in POOLINGS and POOLINGS.get(config.pooling).needs_pooler \
            and getattr(encoder, "pooler", None) is None and any(t.kind.pools for t in tasks):
        raise MtbioError(f"--pooling {config.pooling}: this encoder ({type(encoder).__name__}) has no pooler; pass --pooling "
                         "cls or mean")
    config = without_inapplicable(config, tasks)
    splits = ["train", "dev"] + (["test"] if config.eval_test else [])
    data_files = data_record(tasks, splits, data_dir)
    check_resume(run_dir, config, tasks, data_files)
    accelerator.wait_for_everyone()  # every process has checked before the main one writes
    set_seed(config.seed)
    limit = max_input_tokens(encoder)
    if config.max_length is not None and config.max_length > limit:
        raise MtbioError(f"--max-length {config.max_length}: the encoder {encoder_source or 'MiniLM-L6'} takes at most "
                         f"{limit} tokens (its position embeddings); give at most {limit}")
    # inputs longer than the encoder's positions are truncated (and counted), never a crash
    tokenizer.model_max_length = min(int(tokenizer.model_max_length), limit)
    for task in tasks:  # a length a task's windows cannot take is refused before anything is built
        effective_max_length(task, tokenizer, config.max_length)
    apply_layer_options(encoder, config)  # --drop-top-layers, --reinit-layers, --freeze-layers
    # built before the data is read, so a head the encoder cannot serve fails before any tokenizing
    heads = build_heads(tasks, encoder.config, heads_source)
    adapters = build_adapters(tasks, encoder, config, heads_source)
    model = MultiTaskModel(encoder, heads, adapters, build_weighting(*config.weighting_spec(), [t.name for t in tasks]))
    data: dict[str, TaskData] = {}
    for task in tasks:
        data[task.name] = load_task_data(task, data_dir, tokenizer, splits, train_examples_of(config, task.name),
                                         config.max_length, config.max_eval_examples)
        for split in ("train", "dev"):
            if len(data[task.name].splits[split]) == 0:
                raise MtbioError(f"task '{task.name}': the {split} split is empty")

    fresh = [t.name for t in tasks if heads_source is None or not (heads_source / t.name).is_dir()]
    resuming = config.resume and bool(list_checkpoints(RunDir(run_dir).checkpoints_dir))
    with untouched_rng():  # neither changes the random draws training makes (a run without them is the same)
        lp_start = fit_heads(model, {t.name: t for t in tasks}, {n: data[n].splits["train"] for n in fresh},
                             tokenizer.pad_token_id, fresh) if config.lp_ft and not resuming else {}
        floor = _floors(tasks, data, encoder_source, tokenizer, config) \
            if config.baselines and accelerator.is_main_process else {}
    per_task = PerTaskBest(lambda m, task: save_model(m, tokenizer, run_dir / BEST_DIR / task, [task])) \
        if config.select_by == "per-task" and len(tasks) > 1 else None
    fitted = [name for name, done in lp_start.items() if done]
    # under LP-FT every start is a candidate for the kept weights: fitted heads, and heads that start from saved ones
    # (a fine-tune of a refined run keeps its start where no evaluation beats it); resumed: its state comes back
    start = EvaluateStart(fitted) if fitted or (config.lp_ft and (resuming or len(fresh) < len(tasks))) else None
    own = [listener for listener in (start, per_task) if listener is not None]
    trainer = Trainer(model, tokenizer, data, TrainerOptions.of(config), run_dir, lr, accelerator,
                      on_best=lambda m: save_model(m, tokenizer, run_dir), listeners=[*listeners, *own])
    if accelerator.is_main_process:  # created only once data, model and batch plan are ready
        with writing(run_dir, hint="choose a writable --output with free space"):
            make_dir(run_dir)
            log_file.attach(run_dir / "run.log")
            write_task_defs(tasks, RunDir(run_dir).tasks_dir)
            save_config(config, RunDir(run_dir).config_file)
            write_json(RunDir(run_dir).data_file, data_files)
    if accelerator.log_with:  # the run's config as hyperparameters (scalars and strings only)
        options = flat_values(config.model_dump(), RunConfig)
        hparams = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in options.items()
                   if k in run_options()}  # a run's own options, not the sweep's or another command's
        accelerator.init_trackers(run_dir.name, config={**hparams, "stage": stage, "learning_rate": lr})
    started = time.time()
    state = trainer.train()
    accelerator.wait_for_everyone()

    dev = state.best_scores  # dev scores of the weights saved in run_dir (the best evaluation)
    trivial = {t.name: trivial_score(t, data[t.name].splits["train"].examples, data[t.name].splits["dev"].examples)
               for t in tasks}
    floors = {t.name: task_floor(trivial[t.name], floor.get(t.name, {}), t.metric) for t in tasks}
    below = sorted(t.name for t in tasks if t.name in dev and is_below_floor(dev[t.name][t.metric], floors[t.name],
                                                                                t.metric))
    for task in (t for t in tasks if t.name in below):
        score, found = dev[task.name][task.metric], floors[task.name]
        advice = ("check the learning rate and the training length" if found["source"] == TRIVIAL
                  else "train longer or with the recipe's small-data settings")
        log.warning("%s: below its floor: dev %s %.4f is %s %s (%s %.4f), the best of its trivial score and "
                    "no-training baselines; %s", task.name, task.metric, score,
                    floor_relation(score, found, task.metric), describe_floor(found["source"]), found["source"],
                    found["score"], advice)
    test: dict[str, dict[str, float]] = {}
    if config.eval_test:  # test is scored once, with the best-dev weights as saved on disk
        _load_saved(trainer, run_dir, [t.name for t in tasks])
        test = trainer.evaluate("test")
    if per_task is not None:  # after the joint weights' own test: this loads each task's weights in turn
        _per_task_best(per_task, trainer, tasks, config, run_dir, stage, encoder_source, trivial, floors)
    results = {
        "stage": stage,
        "tasks": [t.name for t in tasks],
        "encoder_source": encoder_source,
        "mixed_precision": config.mixed_precision,  # as resolved (flag, else Accelerate's setting)
        "best_step": state.best_step,
        "steps": state.global_step,
        "selection_score": state.best_score,
        "dev": dev,
        "test": test,
        "trivial": trivial,  # dev, the task's metric: the better of the training-majority and dev's best constant
        "pair_form": pair_forms,  # pair classification and regression tasks: the form trained and what chose it
        "per_task_best": {name: {"step": found["step"], "dev": found["dev"]}  # --select per-task: best/<task>/
                          for name, found in per_task.best.items()} if per_task is not None else {},
        "lp_start": start.heads if start is not None else [],  # heads fitted before step 1 (--lp-ft)
        "start_scores": start.scores if start is not None else {},  # their dev scores before step 1
        "baselines": floor,  # dev, the task's metric: the start encoder's no-training baselines (--baselines)
        "floor": floors,  # task → {score, source}: the best of its trivial score and its baselines
        "below_floor": below,  # tasks whose dev score does not clear their floor
        "skipped_batches": state.skipped,
        "stopped_early": state.stopped_early,
        "packed_tasks": sorted(trainer.packed),  # tagging tasks whose batches ran as packed rows
        "max_eval_examples": config.max_eval_examples,  # set: dev/test scores are of a fixed subset
        "eval_examples": {name: {s: len(d) for s, d in td.splits.items() if s != "train"} for name, td in data.items()},
        "truncated": {name: {s: d.truncated for s, d in td.splits.items()} for name, td in data.items()},
        "labels_lost": {name: {s: d.labels_lost for s, d in td.splits.items()}  # removed by the cut (answers, entities)
                        for name, td in data.items() if any(d.labels_lost for d in td.splits.values())},
        "examples_scored_per_process": trainer.eval_shares,  # evaluation is sharded over the processes
        "train_examples": state.examples_seen,
        "train_examples_per_second": state.examples_seen / max(state.train_seconds, 1e-9),
        "train_tokens_per_second": state.tokens_seen / max(state.train_seconds, 1e-9),
        **steady_throughput(state),
        "wall_seconds": time.time() - started,
        **cost_record(trainer.unwrapped.encoder.config, state, entered, started),
    }
    learned = trainer.unwrapped.weighting.summary()  # the learned loss weights (none for --weighting fixed)
    if learned:
        results["weighting"] = learned
    if accelerator.is_main_process:
        if test:
            trainer.log_metrics("test", test)
        RunDir(run_dir).write_results(results)
    if accelerator.log_with:
        accelerator.end_training()
    return results
