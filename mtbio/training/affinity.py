"""Inter-task affinity measured during one joint run: a listener of the trainer's step events.

Every `every` optimizer steps the probe draws one measurement batch per task from its train split
(and, with split "dev", one from its dev split for the target's loss; numpy generator seeded by run
seed, step and task: the mixer's batches are not touched) and, in
eval mode with the torch RNG forked (so no dropout mask or later batch of the run changes):

- g_s, the gradient of task s's loss on the shared encoder (autograd.grad: no `.grad` is written);
- lookahead (TAG, Fifty et al., NeurIPS 2021): θ'_s = the encoder moved by the part of the run
  optimizer's next update that g_s contributes (`step_from`: its learning rates, per-parameter
  scale and gradient clipping, on copies), and affinity s → t = 1 − L_t(θ'_s) / L_t(θ), t's loss on its own
  batch through `torch.func.functional_call`;
- cosine s, t = cos(g_s, g_t) over the encoder's parameters.

The real weights, gradients and optimizer state are never written.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch.func import functional_call

from mtbio.data.collate import to_device
from mtbio.errors import MtbioError
from mtbio.fileio import write_json
from mtbio.training.events import Flow, Listener

if TYPE_CHECKING:
    from mtbio.training.trainer import Trainer

Matrix = dict[str, dict[str, float]]  # source -> target -> value


@dataclass
class AffinityPoint:
    """One measurement: the step after which it was taken and both predictors, source → target."""

    step: int
    lookahead: Matrix
    cosine: Matrix


POINTS_FILE = "affinity_points.json"  # a joint run's measurements, written beside its results.json


@dataclass
class AffinityProbe(Listener):
    """A listener of the training loop (`Trainer(listeners=[probe])`): measures at every `every`-th step, and at
    the last step when no measurement fell into the run."""

    state_key: ClassVar[str] = "affinity"  # its points are saved with each checkpoint under this name
    every: int
    batch_size: int
    seed: int
    split: str = "train"  # where the target's batch comes from: "train" (TAG) or "dev" (held-out loss)
    points: list[AffinityPoint] = field(default_factory=list)
    backward_examples: int = 0  # measurement examples run forward and backward (the g_s)
    forward_examples: int = 0  # measurement examples run forward only (the L_t(θ'_s))
    seconds: float = 0.0

    def on_step_end(self, trainer: "Trainer", flow: Flow) -> None:
        step = trainer.state.global_step
        if step % self.every and not (step >= trainer.total_steps and not self.points):
            return
        if trainer.accelerator.num_processes > 1:
            raise MtbioError("affinity measurement runs in one process; run it without accelerate launch")
        start = time.perf_counter()
        self.points.append(self.measure(trainer, step))
        self.seconds += time.perf_counter() - start

    def on_train_end(self, trainer: "Trainer") -> None:
        """The measurements beside the run (POINTS_FILE), before its results.json marks it finished."""
        if trainer.accelerator.is_main_process:
            write_json(Path(trainer.run_dir) / POINTS_FILE, self.summary())

    def state_dict(self) -> dict[str, Any]:
        """The points so far and their cost: a resumed run keeps the measurements made before it stopped."""
        return {"points": [asdict(p) for p in self.points], "backward_examples": self.backward_examples,
                "forward_examples": self.forward_examples, "seconds": self.seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.points = [AffinityPoint(**p) for p in state["points"]]
        self.backward_examples, self.forward_examples = state["backward_examples"], state["forward_examples"]
        self.seconds = state["seconds"]

    def summary(self) -> dict[str, Any]:
        """The points and the measurement's own compute, as JSON."""
        return {"every": self.every, "batch_size": self.batch_size, "split": self.split, **self.state_dict()}

    def indices(self, task_number: int, size: int, step: int) -> list[int]:
        rng = np.random.default_rng([self.seed, step, task_number])
        return sorted(rng.choice(size, size=min(self.batch_size, size), replace=False).tolist())

    def measure(self, trainer: "Trainer", step: int) -> AffinityPoint:
        model, acc = trainer.unwrapped, trainer.accelerator
        tasks = list(trainer.data)
        batches, sizes = {}, {}  # (split, task): the source's gradient batch from train, the target's from `split`
        for split in {"train", self.split}:
            for number, task in enumerate(tasks):
                part = trainer.data[task].splits[split]
                chosen = self.indices(number, len(part), step)
                batches[split, task] = to_device(trainer.collate(task, part, chosen), acc.device)
                sizes[split, task] = len(chosen)
        shared = {f"encoder.{n}": p for n, p in model.encoder.named_parameters() if p.requires_grad}
        was_training = model.training
        model.eval()
        devices = [acc.device.index or 0] if acc.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices):
                grads, before = {}, {}
                for task in tasks:
                    grads[task], before[task] = self._gradient(trainer, task, batches["train", task], shared)
                    self.backward_examples += sizes["train", task]
                cosine = cosine_matrix(grads)
                if self.split != "train":
                    with torch.no_grad(), acc.autocast():
                        before = {t: _positive(t, float(model(t, **batches[self.split, t]).loss)) for t in tasks}
                    self.forward_examples += sum(sizes[self.split, t] for t in tasks)
                lookahead: Matrix = {}
                with torch.no_grad():
                    for source in tasks:
                        updated = lookahead_weights(trainer.raw_optimizer, shared, grads[source])
                        lookahead[source] = {}
                        for target in tasks:
                            if target == source:
                                continue
                            with acc.autocast():
                                after = functional_call(model, updated, (target,), batches[self.split, target]).loss
                            lookahead[source][target] = 1.0 - float(after) / before[target]
                            self.forward_examples += sizes[self.split, target]
        finally:
            model.train(was_training)
        return AffinityPoint(step, lookahead, cosine)

    def _gradient(self, trainer: "Trainer", task: str, batch: dict[str, torch.Tensor],
                  shared: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], float]:
        """Task loss and its gradient on the shared encoder, clipped as the real step clips (the
        norm over the encoder and the task's head)."""
        model = trainer.unwrapped
        head = [p for p in model.heads[task].parameters() if p.requires_grad]
        with torch.enable_grad(), trainer.accelerator.autocast():
            loss = model(task, **batch).loss
        found = torch.autograd.grad(loss, [*shared.values(), *head], allow_unused=True)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in found if g is not None]))
        scale = torch.clamp(trainer.options.step.max_grad_norm / (norm + 1e-6), max=1.0)
        grads = {name: (torch.zeros_like(p) if g is None else g * scale)
                 for (name, p), g in zip(shared.items(), found[: len(shared)])}
        return grads, _positive(task, float(loss.detach()))


def _positive(task: str, loss: float) -> float:
    if not loss > 0:
        raise MtbioError(f"affinity: task '{task}' has loss {loss} on its measurement batch; the ratio "
                         "1 - L(after)/L(before) needs a positive loss")
    return loss


def cosine_matrix(grads: dict[str, dict[str, torch.Tensor]]) -> Matrix:
    """cos(g_s, g_t) for every ordered pair, accumulated parameter by parameter (no flat copies)."""
    tasks = list(grads)
    names = list(grads[tasks[0]])
    gram = torch.zeros(len(tasks), len(tasks), dtype=torch.float64)
    for name in names:
        stacked = torch.stack([grads[t][name].reshape(-1) for t in tasks]).double()
        gram += (stacked @ stacked.T).cpu()
    norms = gram.diagonal().sqrt().clamp_min(1e-30)
    cos = gram / norms[:, None] / norms[None, :]
    return {s: {t: float(cos[i, j]) for j, t in enumerate(tasks) if j != i} for i, s in enumerate(tasks)}


def lookahead_weights(optimizer: torch.optim.Optimizer, shared: dict[str, torch.Tensor],
                      grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """New tensors: `shared` after the step `optimizer` would take on `grads` alone (`step_from`)."""
    groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    updated = {}
    for name, param in shared.items():
        group = groups.get(id(param))
        if group is None:
            raise MtbioError(f"affinity: parameter {name} is not in the optimizer")
        updated[name] = param.detach() - step_from(optimizer, group, grads[name].to(param.dtype),
                                                   optimizer.state.get(param, {}))
    return updated


def step_from(optimizer: torch.optim.Optimizer, group: dict[str, Any], grad: torch.Tensor,
              state: dict[str, Any]) -> torch.Tensor:
    """The part of the optimizer's next update of one parameter that comes from `grad`, as the optimizer's own
    registration computes it (`register_optimizer(..., lookahead=...)`; Adam's: lr·(1 − β1)/(1 − β1^k)·grad/(√v̂ + ε)).
    The momentum and weight decay parts are left out: every source task would share them, and they would hide
    the differences between tasks."""
    from mtbio.training.optimizers import LOOKAHEAD_ATTR, OPTIMIZERS

    lookahead = getattr(optimizer, LOOKAHEAD_ATTR, None)
    if lookahead is None:
        having = [name for name in OPTIMIZERS.names() if getattr(OPTIMIZERS.get(name), "lookahead", None)]
        raise MtbioError(f"affinity: no lookahead for optimizer {type(optimizer).__name__} (its registration gives "
                         f"none; {', '.join(having)} have one)")
    return lookahead(optimizer, group, grad, state)
