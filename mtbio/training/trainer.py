"""The multi-task training run (MT-BERT Algorithm 1 on Accelerate): the run controller `Trainer`.

setup → for each step: the mixer picks a task and a batch of that task → one optimizer step of
the step engine (`mtbio.training.step_engine`: forward through the shared encoder and that task's
head, backward, clip, optimizer and schedule step) → (every N steps / each epoch) evaluate on dev,
keep the best → checkpoint for resume.

`Trainer` holds the run's state (`TrainerState`), the mixer and the epochs, reads the queued losses
on the host (`mtbio.training.loss_queue`: on a GPU the host prepares the next batch while the
current one runs), writes the training curves and stops on SIGTERM/SIGINT. When to evaluate, save
and stop early is decided by listeners of the loop's events (`mtbio.training.events`): the run's
schedule, `--patience`, and any the caller adds (the affinity probe).
"""
from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator, DistributedType
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from mtbio.data.mixers import MultiTaskBatchSampler
from mtbio.data.pipeline import TaskData
from mtbio.errors import MtbioError
from mtbio.evaluation.metrics import score_task, selection_score
from mtbio.fileio import open_for_write
from mtbio.logs import bars_enabled
from mtbio.model.cpu_dropout import use_bit_dropout
from mtbio.model.embedding_grad import reuse_embedding_grad
from mtbio.model.fused_qkv import fuse_qkv
from mtbio.model.encoder import checkpoint_layers
from mtbio.model.inference import bf16_supported, predict_split
from mtbio.model.multitask import MultiTaskModel
from mtbio.model.packing import packing_error, position_offset
from mtbio.run_dir import RunDir
from mtbio.training import checkpoint as ckpt
from mtbio.training.config import RunConfig
from mtbio.training.distributed import any_process
from mtbio.training.events import EarlyStopping, Flow, Listener, Schedule
from mtbio.training.host_memory import bound_host_memory, keep_freed_heap
from mtbio.training.l2sp import AnchorToStart
from mtbio.training.loss_queue import read_interval
from mtbio.training.optim import build_optimizer, build_scheduler, parameter_groups, weighting_group
from mtbio.training.state import TrainerState
from mtbio.training.step_engine import MicroBatch, StepEngine, StepOptions

log = logging.getLogger(__name__)
FIT_EXAMPLES = 2000  # training examples a fitted decision rule (--thresholds fit) is fitted on


@dataclass(frozen=True)
class TrainerOptions:
    """The run options the trainer reads (it receives these, not the run's whole config): the run's length and
    batches, the optimizer and its schedule, evaluation and checkpoint cadence, and what an optimizer step reads."""

    batch_size: int
    eval_batch_size: int
    epochs: int
    max_steps: int | None
    min_steps: int | None
    max_epochs: int | None
    evaluations: int
    grad_accum: int
    seed: int
    mixer: tuple[str, dict[str, Any]]  # name and options
    bucket_window: int
    packing: bool
    optimizer: tuple[str, dict[str, Any]]  # name and options
    weight_decay: float
    layerwise_lr_decay: float | None
    warmup: float
    schedule: str
    l2sp: float | None
    eval_every: int | None
    save_every: int | None
    patience: int | None
    log_every: int
    thresholds: str
    resume: bool
    compile: bool
    activation_checkpointing: Any
    step: StepOptions

    @classmethod
    def of(cls, config: RunConfig) -> "TrainerOptions":
        names = [f.name for f in fields(cls) if f.name not in ("mixer", "optimizer", "step")]
        return cls(**{name: getattr(config, name) for name in names}, mixer=config.mixer_spec(),
                   optimizer=config.optimizer_spec(), step=StepOptions.of(config))


def build_sampler(config: TrainerOptions, lengths: Mapping[str, Sequence[int]],
                  packed: Collection[str] = ()) -> MultiTaskBatchSampler:
    """The run's batch plan (mixer strategy and its options, seed, length bucketing, the run's length)
    from its config; `packed` tasks draw random batches (packing, not bucketing, removes their padding)."""
    windows = {task: 1 if task in packed else config.bucket_window for task in lengths}
    name, options = config.mixer
    try:
        sampler = MultiTaskBatchSampler(lengths, batch_size=config.batch_size, strategy=name, seed=config.seed,
                                        bucket_multiplier=windows, **options)
        sampler.run_batches = run_batches(config, len(sampler))
        return sampler
    except ValueError as exc:  # options that do not fit these tasks (a main task that is not one of them...)
        raise MtbioError(f"--mixer {name}: {exc}") from None


def run_batches(config: TrainerOptions, epoch_batches: int) -> int:
    """The batches a run takes in all: whole epochs of `epoch_batches`, then the steps of --max-steps
    left over (`grad_accum` batches each), so that a mixer's schedule follows --max-steps when given."""
    per_epoch, total = run_length(config, epoch_batches)
    return total // per_epoch * epoch_batches + total % per_epoch * config.grad_accum


def tracker_scalars(record: dict[str, Any]) -> dict[str, float]:
    """A metrics.jsonl line as flat tracker scalars: train/loss/<task>, train/lr, ..., dev/<task>/<metric>."""
    split = record["split"]
    if split == "train":
        out = {f"train/loss/{task}": value for task, value in record["loss"].items()}
        out.update({f"train/{key}": record[key] for key in ("lr", "grad_norm", "examples_per_second")
                    if record.get(key) is not None})
        return out
    return {f"{split}/{task}/{metric}": value for task, scores in record["scores"].items()
            for metric, value in scores.items()}


def run_length(config: TrainerOptions, epoch_batches: int) -> tuple[int, int]:
    """(optimizer steps per epoch, optimizer steps in all) of a run whose mixer plans `epoch_batches`
    batches an epoch: the one count the trainer runs and the sweep's time estimate uses. `--max-steps` sets it;
    else `--epochs` whole epochs, raised to `--min-steps` when they fall short (the last epoch may be partial), the
    floor stopping at `--max-epochs` epochs."""
    per_epoch = max(1, math.ceil(epoch_batches / config.grad_accum))
    floor = config.min_steps or 0
    if config.max_epochs is not None:
        floor = min(floor, per_epoch * config.max_epochs)
    return per_epoch, config.max_steps or max(per_epoch * config.epochs, floor)


def packed_tasks(config: TrainerOptions, model: MultiTaskModel, pad_token_id: int) -> set[str]:
    """The tasks whose training batches run as packed rows: with --packing (the default), those
    with a per-token head that reads no windows, if the encoder gives the same hidden states packed as unpacked."""
    tasks = {name for name, head in model.heads.items() if head.packable and not head.config.sliding_window
             } if config.packing else set()
    if tasks:
        error = packing_error(model.encoder, pad_token_id)
        if error is not None:
            log.warning("packing is off: this encoder (%s) does not run packed rows as it runs single sentences "
                        "(%s); tasks %s use length-bucketed batches", type(model.encoder).__name__, error,
                        ", ".join(sorted(tasks)))
            return set()
    return tasks


def warm_up_steps(total_steps: int) -> int:
    """Steps left out of the steady-state throughput: the first tenth, at most 20 (kernel autotuning,
    allocator growth and, with --compile, compilation happen there)."""
    return min(20, max(1, total_steps // 10))


def resolve_mixed_precision(flag: str | None) -> str:
    """The precision to train in: the flag when given, else Accelerate's (`accelerate launch
    --mixed_precision` or `accelerate config`, passed as ACCELERATE_MIXED_PRECISION), else "no"."""
    from_accelerate = os.environ.get("ACCELERATE_MIXED_PRECISION") or None
    if flag is None:
        return from_accelerate or "no"
    if from_accelerate is not None and from_accelerate != flag:
        log.warning("--mixed-precision %s wins over Accelerate's mixed_precision %s", flag, from_accelerate)
    return flag


def make_accelerator(mixed_precision: str | None, report_to: Sequence[Any] = (),
                     project_dir: Path | None = None) -> Accelerator:
    """Accelerator for this machine; refuses fp16 where Accelerate would silently run fp32.
    `report_to`: tracker names (or `GeneralTracker` objects) for `accelerator.log`, writing under
    `project_dir` where the tracker writes files."""
    mixed_precision = resolve_mixed_precision(mixed_precision)
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        bound_host_memory(mixed_precision)
    if mixed_precision == "fp16" and not on_gpu:
        raise MtbioError("--mixed-precision fp16 needs a GPU (on a CPU Accelerate silently runs fp32); use bf16 or no")
    if mixed_precision == "bf16" and not on_gpu:
        if not bf16_supported("cpu"):
            raise MtbioError("--mixed-precision bf16: this CPU has no bf16 support in hardware (AVX512-BF16 or AMX), "
                              "and emulated bf16 runs slower than fp32; use --mixed-precision no")
    from accelerate import DistributedDataParallelKwargs

    # Heads that a step does not use get no gradient; DDP must not wait for them.
    ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
    accelerator = Accelerator(mixed_precision=mixed_precision, cpu=not on_gpu, kwargs_handlers=[ddp],
                              log_with=list(report_to) or None, project_dir=project_dir)
    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        raise MtbioError(f"accelerate config: {accelerator.distributed_type.value} is not supported; mtbio trains "
                         "with data parallelism (DDP: distributed_type MULTI_GPU or MULTI_CPU, see docs/clusters.md)")
    return accelerator


def steady_throughput(state: TrainerState) -> dict[str, float]:
    """Train examples/s after the warm-up steps (`warm_up_steps`), when steps followed them."""
    warm = state.warm
    seconds = state.train_seconds - warm.get("seconds", 0.0)
    if not warm or state.examples_seen <= warm["examples"] or seconds <= 0:
        return {}
    return {"steady_train_examples_per_second": (state.examples_seen - warm["examples"]) / seconds,
            "steady_after_steps": int(warm["steps"])}


class StopRequested(Exception):
    """Raised after a SIGTERM/SIGINT once the state at a step boundary is saved."""


class Trainer:
    """Trains `model` on the train splits of `data`, selecting on dev, writing into `run_dir`: the
    run controller around a `StepEngine` (`engine`), which advances this trainer's `state`."""

    def __init__(
        self,
        model: MultiTaskModel,
        tokenizer: Any,
        data: dict[str, TaskData],
        options: TrainerOptions,
        run_dir: Path,
        lr: float,
        accelerator: Accelerator,
        on_best: Any = None,
        listeners: Sequence[Listener] = (),
    ):
        self.options = options
        # the run's schedule and --patience decide evaluations, checkpoints and early stops as listeners of the
        # loop's events (mtbio.training.events), before any listener of the caller's (the affinity probe)
        self.listeners: list[Listener] = [Schedule(options.eval_every, options.save_every, options.evaluations),
                                          *([EarlyStopping(options.patience)] if options.patience else []),
                                          *([AnchorToStart(model.encoder, options.l2sp)] if options.l2sp else []),
                                          *listeners]
        self.flow = Flow()
        self.run_dir = run_dir
        self.data = data
        self.tokenizer = tokenizer
        self.pad_id = int(tokenizer.pad_token_id or 0)
        self.accelerator = accelerator
        self.on_best = on_best
        self.state = TrainerState()  # the one state: the engine advances it, checkpoints save it, resume replaces it
        self._stop_signal: int | None = None
        self.read_every = read_interval(accelerator.device)  # optimizer steps between host reads of the losses

        lengths = {name: d.splits["train"].lengths for name, d in data.items()}
        if accelerator.device.type == "cpu":
            keep_freed_heap()  # big tensors reuse pages already mapped
            use_bit_dropout(model)  # dropout masks from random bits: ~5x cheaper than torch's on a CPU
            fuse_qkv(model.encoder)  # one projection product instead of three (measured on a CPU only)
            reuse_embedding_grad(model.encoder)  # no page faults for a fresh 47 MB gradient every step
        packed = packed_tasks(options, model, self.pad_id)
        self._scored = 0
        self.eval_shares: dict[str, list[int]] = {}  # examples each process scored at the last evaluation of a split
        if options.activation_checkpointing:
            checkpoint_layers(model.encoder, options.activation_checkpointing)
        if options.compile:  # in place: the encoder's state_dict keys (and so the saved files) stay the same
            model.encoder.compile()
        offset = position_offset(model.encoder)
        self.sampler = build_sampler(options, lengths, packed)
        self.steps_per_epoch, self.total_steps = run_length(options, len(self.sampler))
        groups = parameter_groups(model, options.weight_decay, lr, options.layerwise_lr_decay)
        groups = weighting_group(groups, model.weighting, model.weighting.learning_rate())
        name, settings = options.optimizer
        optimizer = build_optimizer(groups, name, lr, options=settings)
        self.scheduler = build_scheduler(optimizer, self.total_steps, options.warmup, options.schedule)
        # The scheduler is stepped by hand once per optimizer step (Accelerate's wrapper would
        # step it once per process).
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.engine = StepEngine(self.model, self.optimizer, self.scheduler, data, options.step, accelerator,
                                 self.pad_id, packed, offset)

    # ------------------------------------------------------------------ public API
    @property
    def unwrapped(self) -> MultiTaskModel:
        return self.accelerator.unwrap_model(self.model)

    @property
    def raw_optimizer(self) -> torch.optim.Optimizer:
        """The torch optimizer inside Accelerate's wrapper (what checkpoints save and restore)."""
        return getattr(self.optimizer, "optimizer", self.optimizer)

    @property
    def packed(self) -> set[str]:
        """The tasks whose training batches run as packed rows."""
        return self.engine.packed

    @property
    def last_loss(self) -> float | None:
        """Mean loss of the steps up to the last host read of the losses."""
        return self.engine.last_loss

    def collate(self, task: str, part: Any, chunk: list[int]) -> dict[str, torch.Tensor]:
        """The rows `chunk` of `part` as the training step feeds them (packed rows for packed tasks)."""
        return self.engine.collate(task, part, chunk)

    def train(self) -> TrainerState:
        """Run to `total_steps`, evaluating on dev each epoch (or every `eval_every` steps)."""
        cfg = self.options
        if cfg.resume:
            self._resume()
        # from_pretrained returns the encoder in eval mode: without this, dropout would stay off
        # until the first evaluation (and a resumed run would differ from an uninterrupted one)
        self.model.train()
        self._install_signal_handlers()
        bar = tqdm(total=self.total_steps, initial=self.state.global_step, desc="train", unit="step",
                   disable=not self.accelerator.is_main_process or not bars_enabled(), dynamic_ncols=True)
        try:
            if self.state.global_step == 0:
                for listener in self.listeners:
                    listener.on_train_start(self, self.flow)
                self._follow_flow(mid_epoch=False)
            while self.state.global_step < self.total_steps and not self.state.stopped_early:
                self.sampler.set_epoch(self.state.epoch)
                if self.state.mixer:  # resuming mid-epoch
                    try:
                        self.sampler.load_state_dict(self.state.mixer)
                    except ValueError as exc:
                        raise MtbioError(f"--resume: {exc}; resume with the options the run was started with") from None
                    self.state.mixer = {}
                micro: list[MicroBatch] = []
                for task, indices in self.sampler:
                    micro.append((task, indices))
                    if len(micro) == cfg.grad_accum:
                        self._step_and_report(micro, bar)
                        micro = []
                        if self.state.global_step >= self.total_steps:
                            break
                        if self._follow_flow(mid_epoch=True):
                            break
                else:  # the epoch ran out (no break)
                    if micro:
                        self._step_and_report(micro, bar)
                    self.state.epoch += 1
                    if self.state.global_step < self.total_steps:
                        for listener in self.listeners:
                            listener.on_epoch_end(self, self.flow)
                        self._follow_flow(mid_epoch=False)
            self.flow.reset()  # the run's end: one last evaluation (unless the last step had one) and checkpoint
            if self.state.last_eval_step != self.state.global_step:
                self.evaluate_and_select()
            self.save_checkpoint(mid_epoch=self.sampler_mid_epoch())
            for listener in self.listeners:
                listener.on_train_end(self)
        finally:
            bar.close()
            self._restore_signal_handlers()
        return self.state

    def _follow_flow(self, mid_epoch: bool) -> bool:
        """Do what the listeners asked after an event (evaluate, then checkpoint), stop on a signal (mid-epoch),
        and return whether training stops early."""
        flow = self.flow
        if flow.evaluate:
            flow.evaluate = False
            self.evaluate_and_select()
        if flow.save:
            flow.save = False
            self.save_checkpoint(mid_epoch)
        if mid_epoch and self._stop_requested():
            self.save_checkpoint(mid_epoch=True)
            raise StopRequested(self._stop_signal)
        if flow.stop:
            self.state.stopped_early = True
        flow.reset()
        return self.state.stopped_early

    def sampler_mid_epoch(self) -> bool:
        position = self.sampler.state_dict().get("position", 0)
        return 0 < position < len(self.sampler)

    def _step_and_report(self, micro: list[MicroBatch], bar: Any) -> None:
        task_name = self.engine.step(micro, self.state)
        self.state.global_step += 1
        step, warm = self.state.global_step, warm_up_steps(self.total_steps)
        log_now = step % self.options.log_every == 0 or step == self.total_steps
        if log_now or step % self.read_every == 0 or step in (warm, self.total_steps):
            self.read_losses()
        if log_now:
            lr = float(self.scheduler.get_last_lr()[0])
            self.write_metrics(self.engine.curves.record(step, self.state.epoch, lr, self.state.examples_seen,
                                                         self.state.train_seconds))
        if step == warm:  # just read: the clock has caught up with the device
            self.state.warm = {"steps": step, "examples": self.state.examples_seen,
                               "seconds": self.state.train_seconds}
        bar.update(1)
        rate = self.state.examples_seen / max(self.state.train_seconds, 1e-9)
        loss = "-" if self.last_loss is None else f"{self.last_loss:.4f}"
        bar.set_postfix(task=task_name, loss=loss, ex_s=f"{rate:.1f}")
        for listener in self.listeners:
            listener.on_step_end(self, self.flow)

    def read_losses(self) -> None:
        """Read the queued losses on the host (one transfer, its time counted as training time)
        and stop at the first non-finite one: the engine's `read_losses` on this trainer's state.
        `train` calls it every `read_every` steps, at the steps it logs, the warm-up and the last
        step, and before each evaluation and checkpoint."""
        self.engine.read_losses(self.state)

    def evaluate(self, split: str, tasks: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
        """Score every task (or `tasks`) on `split` with the current weights.

        With several processes each predicts its share of the evaluation batches (every k-th), the
        predictions are gathered with `gather_for_metrics`, and every process scores all of them,
        so every process holds the same scores and no prediction is counted twice.
        """
        self.accelerator.wait_for_everyone()
        started = time.perf_counter()
        scores = self._score(split, tasks)
        self.state.eval_seconds += time.perf_counter() - started
        return scores

    def _predict_share(self, name: str, part: Any) -> list[Any]:
        """This process's share of the split's predictions, gathered from every process (examples' order)."""
        batches = list(part.eval_batches(self.options.eval_batch_size))
        mine = batches[self.accelerator.process_index::self.accelerator.num_processes]
        predictions = predict_split(self.unwrapped, name, part, self.pad_id, self.options.eval_batch_size,
                                    self.accelerator.device, self.accelerator.autocast,
                                    progress=self.accelerator.is_main_process, batches=mine)
        pairs = [(i, predictions[i]) for indices in mine for i in indices]
        self._scored += len(pairs)
        if self.accelerator.num_processes == 1:
            return predictions
        ordered: list[Any] = [None] * len(part)
        for index, prediction in self.accelerator.gather_for_metrics(pairs, use_gather_object=True):
            ordered[index] = prediction
        return ordered

    def _score(self, split: str, tasks: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
        results: dict[str, dict[str, float]] = {}
        self._scored = 0
        for name, data in self.data.items():
            if split not in data.splits or (tasks is not None and name not in tasks):
                continue
            part = data.splits[split]
            self.state.eval_tokens += sum(part.lengths)
            self.state.eval_token_squares += sum(n * n for n in part.lengths)
            predictions = self._predict_share(name, part)
            gold = [ex.label for ex in part.examples]
            groups = [ex.group for ex in part.examples]
            results[name] = score_task(data.task, gold, predictions, groups)
        shares = [self._scored]
        if self.accelerator.num_processes > 1:
            shares = [int(n) for n in gather_object(shares)]
        self.eval_shares[split] = shares
        return results

    def fit_decisions(self) -> None:
        """--thresholds fit: each head with a fitted decision rule (`Head.fits_decision`) refits it on the current
        weights' predictions for (up to `FIT_EXAMPLES` of) its training examples."""
        if self.options.thresholds != "fit":
            return
        size = self.options.eval_batch_size
        for name, data in self.data.items():
            head = self.unwrapped.heads[name]
            if not head.fits_decision:
                continue
            part = data.splits["train"]
            kept = list(range(min(len(part), FIT_EXAMPLES)))
            found = predict_split(self.unwrapped, name, part, self.pad_id, size, self.accelerator.device,
                                  self.accelerator.autocast, progress=False, with_scores=True,
                                  batches=[kept[i:i + size] for i in range(0, len(kept), size)])
            head.fit_decision([found[i][1] for i in kept], [part.examples[i].label for i in kept])

    def evaluate_and_select(self) -> dict[str, dict[str, float]]:
        """Evaluate on dev (after refitting fitted decision rules), log it, keep the weights if the mean primary
        score improved, and tell the listeners (`--patience N` stops after N evaluations in a row without
        improvement)."""
        self.read_losses()
        started = time.perf_counter()
        self.fit_decisions()
        self.state.eval_seconds += time.perf_counter() - started
        scores = self.evaluate("dev")
        primary = [selection_score(self.data[t].task, scores[t]) for t in scores]  # signed: higher is better
        selection = sum(primary) / len(primary) if primary else -self.state.global_step
        improved = selection > self.state.best_score
        if improved:
            self.state.best_score, self.state.best_step = selection, self.state.global_step
            self.state.best_scores = scores
            if self.on_best is not None and self.accelerator.is_main_process:
                started = time.perf_counter()
                self.on_best(self.unwrapped)
                self.state.save_seconds += time.perf_counter() - started
        self.state.evals_since_best = 0 if improved else self.state.evals_since_best + 1
        self.state.last_eval_step = self.state.global_step
        self.log_metrics("dev", scores, selection=selection, best=improved)
        for listener in self.listeners:
            listener.on_evaluate(self, scores, improved, self.flow)
        return scores

    def log_metrics(self, split: str, scores: dict[str, dict[str, float]], **extra: Any) -> None:
        self.write_metrics({"step": self.state.global_step, "epoch": self.state.epoch, "split": split,
                            "scores": scores, **extra})

    def write_metrics(self, record: dict[str, Any]) -> None:
        """Append one line to metrics.jsonl (main process only) and send its scalars to the trackers."""
        if self.accelerator.trackers:
            self.accelerator.log(tracker_scalars(record), step=record["step"])
        if not self.accelerator.is_main_process:
            return
        with open_for_write(RunDir(self.run_dir).metrics_file, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def save_checkpoint(self, mid_epoch: bool) -> None:
        """Save everything needed to resume; mid-epoch checkpoints also hold the mixer position."""
        self.read_losses()
        self.accelerator.wait_for_everyone()
        started = time.perf_counter()
        if self.accelerator.is_main_process:
            state = dict(self.state.__dict__, mixer=self.sampler.state_dict() if mid_epoch else {},
                         listeners=self._listener_states())
            ckpt.save_checkpoint(RunDir(self.run_dir).checkpoints_dir, self.state.global_step, self.unwrapped,
                                 self.raw_optimizer,
                                 self.scheduler, state)
        self.accelerator.wait_for_everyone()
        self.state.save_seconds += time.perf_counter() - started
        for listener in self.listeners:
            listener.on_save(self, self.flow)

    # ------------------------------------------------------------------ internals
    def _resume(self) -> None:
        latest = ckpt.latest_checkpoint(RunDir(self.run_dir).checkpoints_dir)
        if latest is None:
            log.warning("--resume: no complete checkpoint in %s; starting from the beginning", self.run_dir)
            return
        optimizer = self.raw_optimizer
        saved = ckpt.load_checkpoint(latest, self.unwrapped, optimizer, self.scheduler)
        self.state = TrainerState(**saved)
        if "last_eval_step" not in saved:  # a checkpoint from before it was kept: the schedule kept it then
            self.state.last_eval_step = saved.get("listeners", {}).get("schedule", {}).get("last_evaluated", -1)
        for name, listener in self._stateful_listeners().items():
            if name in self.state.listeners:
                listener.load_state_dict(self.state.listeners[name])
        for listener in self.listeners:  # the checkpoint resumed from is the run's last save
            listener.on_save(self, self.flow)
        if self.accelerator.is_main_process:  # evaluations after the checkpoint will be redone
            ckpt.truncate_metrics(RunDir(self.run_dir).metrics_file, self.state.global_step)
        log.info("resumed from %s (step %d)", latest, self.state.global_step)

    def _stateful_listeners(self) -> dict[str, Listener]:
        """The listeners that keep state across a resume, by their `state_key`."""
        return {listener.state_key: listener for listener in self.listeners if listener.state_key}

    def _listener_states(self) -> dict[str, Any]:
        return {name: listener.state_dict() for name, listener in self._stateful_listeners().items()}

    def _stop_requested(self) -> bool:
        """A signal reached any process (decided together, so all stop at the same step). With
        several processes this is a collective, asked only at the steps whose losses are read."""
        if self.accelerator.num_processes > 1 and self.state.global_step % self.read_every:
            return False
        return any_process(self.accelerator, self._stop_signal is not None)

    def _install_signal_handlers(self) -> None:
        def request_stop(signum: int, _frame: Any) -> None:
            self._stop_signal = signum

        self._previous = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}

    def _restore_signal_handlers(self) -> None:
        for sig, handler in getattr(self, "_previous", {}).items():
            signal.signal(sig, handler)
