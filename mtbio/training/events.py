"""The training loop's events and the flow object that decides what it does next.

The `Trainer` raises a small set of events (`on_step_end` after every optimizer step, `on_epoch_end`,
`on_evaluate` after a dev evaluation, `on_save` after a checkpoint, `on_train_end`), each with the
trainer and a `Flow`. Listeners set the flow's `evaluate`, `save` and `stop`, and the loop acts on it
once every listener has run, as the Hugging Face Trainer's callbacks set its `TrainerControl` and
jiant's metarunner decides when to validate. The run's own schedule (`--eval-every`, `--save-every`,
once per epoch), `--patience` and the affinity probe are listeners; so is anything a user adds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass
class Flow:
    """What the loop does after the event being handled (reset after it acts)."""

    evaluate: bool = False
    save: bool = False
    stop: bool = False

    def reset(self) -> None:
        self.evaluate = self.save = self.stop = False


class Listener:
    """Reacts to the run's events; override the ones it needs. `trainer` is the `mtbio.training.trainer.Trainer`
    (`trainer.state` the run's state)."""

    def on_train_start(self, trainer: Any, flow: Flow) -> None:
        """Before the first optimizer step of a run (not when it resumes)."""

    def on_step_end(self, trainer: Any, flow: Flow) -> None:
        """After each optimizer step (`trainer.state.global_step` is the step just taken)."""

    def on_epoch_end(self, trainer: Any, flow: Flow) -> None:
        """After the sampler ran out of batches (`trainer.state.epoch` already counts the epoch)."""

    def on_evaluate(self, trainer: Any, scores: dict[str, dict[str, float]], improved: bool, flow: Flow) -> None:
        """After a dev evaluation (its scores per task; whether it was the best so far)."""

    def on_save(self, trainer: Any, flow: Flow) -> None:
        """After a checkpoint was written (and once on resuming: the checkpoint resumed from)."""

    def on_train_end(self, trainer: Any) -> None:
        """After the last evaluation and checkpoint."""

    state_key: str = ""  # set by a listener that keeps state across a resume: the name the state is saved under

    def state_dict(self) -> dict[str, Any]:
        """What this listener has gathered so far, as JSON, saved with every checkpoint (with a `state_key`)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take back what `state_dict` returned when the run resumes from a checkpoint."""


class Schedule(Listener):
    """The run's own cadence: evaluate every `--eval-every` steps (else once per epoch), and checkpoint every
    `--save-every` steps and at the end of each epoch. A run of many short epochs (a small set under `--min-steps`)
    evaluates and checkpoints at an epoch's end only once 1/`evaluations` of the run has passed since the last time; the
    run's end always does both. The last evaluation's step travels with the checkpoint (`last_eval_step`) and a
    resume counts as the last save, so a resumed run evaluates at the steps an uninterrupted one does."""

    def __init__(self, eval_every: int | None, save_every: int | None, evaluations: int = 10):
        self.eval_every, self.save_every, self.evaluations = eval_every, save_every, evaluations
        self.last_saved = 0

    def on_step_end(self, trainer: Any, flow: Flow) -> None:
        step = trainer.state.global_step
        flow.evaluate |= bool(self.eval_every) and step % (self.eval_every or 1) == 0
        flow.save |= bool(self.save_every) and step % (self.save_every or 1) == 0

    def on_epoch_end(self, trainer: Any, flow: Flow) -> None:
        step, gap = trainer.state.global_step, max(1, trainer.total_steps // self.evaluations)
        flow.evaluate |= not self.eval_every and step - max(0, trainer.state.last_eval_step) >= gap
        flow.save |= step - self.last_saved >= gap

    def on_save(self, trainer: Any, flow: Flow) -> None:
        self.last_saved = trainer.state.global_step


class EvaluateStart(Listener):
    """Evaluate the starting weights, so that dev-based selection can keep them: a run whose heads start fitted
    (LP-FT) keeps its start when no later evaluation is better on dev, instead of ending below it. `heads`: the tasks
    whose heads were fitted; `scores`: the start's dev scores. Both travel with the checkpoints (a resumed run
    reports them)."""

    state_key = "start"

    def __init__(self, heads: Sequence[str] = ()) -> None:
        self.heads = sorted(heads)
        self.scores: dict[str, dict[str, float]] = {}

    def on_train_start(self, trainer: Any, flow: Flow) -> None:
        flow.evaluate = True

    def on_evaluate(self, trainer: Any, scores: dict[str, dict[str, float]], improved: bool, flow: Flow) -> None:
        if trainer.state.global_step == 0:
            self.scores = scores

    def state_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "scores": self.scores}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.heads, self.scores = list(state.get("heads", [])), dict(state.get("scores", {}))


class EarlyStopping(Listener):
    """`--patience N`: stop after N evaluations in a row without a better dev score."""

    def __init__(self, patience: int):
        self.patience = patience

    def on_evaluate(self, trainer: Any, scores: dict[str, Any], improved: bool, flow: Flow) -> None:
        if trainer.state.evals_since_best >= self.patience:
            flow.stop = True
