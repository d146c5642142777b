"""`--select per-task`: a joint run keeps, beside the weights of its best mean dev score, each task's own best
dev evaluation (the encoder at that step and the task's head), as jiant keeps a checkpoint per target task."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mtbio.evaluation.metrics import selection_score
from mtbio.training.events import Flow, Listener


class PerTaskBest(Listener):
    """After each dev evaluation, `save(model, task)` for every task whose primary score is its best so far."""

    state_key = "per_task_best"

    def __init__(self, save: Callable[[Any, str], None]):
        self.save = save
        self.best: dict[str, dict[str, Any]] = {}  # task -> {"score" (signed), "step", "dev"}

    def on_evaluate(self, trainer: Any, scores: dict[str, dict[str, float]], improved: bool, flow: Flow) -> None:
        for task, found in scores.items():
            value = selection_score(trainer.data[task].task, found)
            if task in self.best and value <= self.best[task]["score"]:
                continue
            self.best[task] = {"score": value, "step": trainer.state.global_step, "dev": found}
            if trainer.accelerator.is_main_process:
                self.save(trainer.unwrapped, task)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = dict(state.get("best", {}))
