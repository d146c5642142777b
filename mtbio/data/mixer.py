"""The multi-task batch plan: which task, and which of its examples, at each training step.

Every batch holds examples of one task. Strategies (per epoch) are registered in `MIXERS`, one
module each in `mtbio.data.mixers` (importing that package registers them all); a strategy is a
function `plan(sampler, epoch)` decorated with `@register_mixer("name", options=Model)`, where the
pydantic `Model` holds its options (`sampler.options`), which `--mixer` and the YAML config then
accept (`mixer: {name: annealed, anneal_to: 0.5}`). A strategy also sees the run's length in
batches (`sampler.run_batches`), so that a schedule spans the run (with `--max-steps` too). The
built-in ones (`mtbio.data.mixers`): proportional (default), temperature, uniform, ratio, annealed.

Inside a task, batches are length-bucketed: the task's indices are shuffled, cut into windows of
`batch_size × bucket_multiplier`, each window is sorted by length and cut into batches, and the
batch order is shuffled. Batches thus hold similar lengths (little padding) while the order stays
random. `bucket_multiplier=1` turns bucketing off; a mapping gives each task its own (packed
tagging tasks take 1: random batches, whose padding packing removes, `mtbio.data.packing`). The
default window (200 batches) is wide on purpose: narrower windows leave too much spread in the
sparse long tail. (On a GPU the collator also rounds widths up to a multiple of 8, which alone
wastes ~8% at NER lengths (mean ~38); with that rounding, BC2GM train at batch 32 pads 11.0% with
windows of 50, 9.7% with 100, 9.0% with 200. On a CPU there is no rounding.) Randomness is kept
by the per-epoch reshuffle, the random order among equal lengths, and the shuffled batch order.

The plan of epoch e is a pure function of (seed, e, lengths, options): every random draw comes
from a numpy Generator seeded by (seed, e, ...). That makes it resumable (`state_dict` holds the
epoch and the number of batches yielded) and identical on every process.

Multi-process training: do NOT let accelerate shard this sampler. accelerate's `BatchSamplerShard`
(`split_batches=False`, the default) hands *different* batches to each process, so with
task-homogeneous batches the ranks would run different tasks in the same step and DDP would
average a head's gradients with the zeros of ranks that ran another task. Instead every process
builds this same plan from the shared seed — all ranks run the same task at every step — and
takes its own slice of each batch with `shard(indices, rank, world_size)`; `batch_size` is the
global batch size.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from pydantic import BaseModel, ConfigDict

from mtbio.data.packing import packed_width_and_rows
from mtbio.registry import Registry, validate_options

Batch = tuple[str, list[int]]
PlanFn = Callable[["MultiTaskBatchSampler", int], list[Batch]]


class MixerOptions(BaseModel):
    """A strategy's options (none by default); a flag may be a shorthand for one (`--temperature-cap` → `cap`: the
    run config's `RUN_SHORTHANDS`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class MixerStrategy:
    """A registered strategy: the epoch's plan (unshuffled where `shuffle_plan`), its options model,
    and optionally the epoch's length in batches (default: every batch of every task once), a check of
    the options against the tasks, and whether the plan depends on the run's length (`uses_run_length`)."""

    name: str
    plan: PlanFn
    options: type[MixerOptions] = MixerOptions
    epoch_batches: Callable[["MultiTaskBatchSampler"], int] | None = None
    check: Callable[["MultiTaskBatchSampler"], None] | None = None
    shuffle_plan: bool = True
    uses_run_length: bool = False


MIXERS: Registry[MixerStrategy] = Registry("mixer strategy")


def register_mixer(
    name: str,
    *,
    options: type[MixerOptions] = MixerOptions,
    epoch_batches: Callable[["MultiTaskBatchSampler"], int] | None = None,
    check: Callable[["MultiTaskBatchSampler"], None] | None = None,
    shuffle_plan: bool = True,
    uses_run_length: bool = False,
) -> Callable[[PlanFn], PlanFn]:
    """Register `plan(sampler, epoch) -> [(task, indices), ...]` as mixer strategy `name`. With
    `shuffle_plan` the sampler shuffles the plan's batch order with the epoch's seeded generator."""

    def decorator(plan: PlanFn) -> PlanFn:
        MIXERS.register(name)(MixerStrategy(name, plan, options, epoch_batches, check, shuffle_plan, uses_run_length))
        return plan

    return decorator


def mixer_options(name: str, values: Mapping[str, Any]) -> MixerOptions:
    """Strategy `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(MIXERS.get(name).options, values, f"mixer '{name}'")


# seed streams: (seed, epoch, stream, ...) keeps the plan, task passes and the aux pool independent
_PLAN, _TASK, _AUX = 0, 1, 2  # _AUX: the ratio strategy's pool


class MultiTaskBatchSampler:
    """Yields `(task_name, example_indices)`; seeded, resumable, identical on every process."""

    def __init__(
        self,
        lengths: Mapping[str, Sequence[int]],
        batch_size: int,
        strategy: str = "proportional",
        seed: int = 0,
        bucket_multiplier: int | Mapping[str, int] = 200,
        shuffle: bool = True,
        drop_last: bool = False,
        run_batches: int | None = None,
        **options: Any,
    ) -> None:
        """`options`: the strategy's (its options model checks them); `run_batches`: the batches the
        run will take in all (default: one epoch), for strategies whose plan follows the run's length."""
        if strategy not in MIXERS:
            raise ValueError(f"unknown sampling strategy '{strategy}'; use one of {', '.join(MIXERS.names())}")
        windows = bucket_multiplier if isinstance(bucket_multiplier, Mapping) else dict.fromkeys(lengths, bucket_multiplier)
        if batch_size < 1 or any(windows.get(t, 0) < 1 for t in lengths):
            raise ValueError("batch_size and every task's bucket_multiplier must be at least 1")
        if seed < 0:
            raise ValueError("seed must be non-negative")
        self.tasks = list(lengths)
        if not self.tasks:
            raise ValueError("no tasks to sample from")
        self.lengths = {t: np.asarray(lengths[t], dtype=np.int64) for t in self.tasks}
        self.batch_size, self.strategy, self.seed = batch_size, strategy, seed
        self.mixer = MIXERS.get(strategy)
        self.options = mixer_options(strategy, options)
        self.bucket_multiplier = {t: int(windows[t]) for t in self.tasks}
        self.shuffle, self.drop_last = shuffle, drop_last
        self.n_batches = {t: self._batches_per_pass(len(self.lengths[t])) for t in self.tasks}
        empty = [t for t, n in self.n_batches.items() if n == 0]
        if empty:
            raise ValueError(f"task(s) {empty} have no full batch of {batch_size} examples")
        if self.mixer.check is not None:
            self.mixer.check(self)
        if run_batches is not None and run_batches < 1:
            raise ValueError("run_batches must be at least 1")
        self.run_batches = run_batches or len(self)
        self.epoch = 0
        self.position = 0
        self._plan_cache: tuple[int, list[Batch]] | None = None

    # -------------------------------------------------------------------------------- public API

    def __len__(self) -> int:
        """Batches in one epoch."""
        if self.mixer.epoch_batches is not None:
            return self.mixer.epoch_batches(self)
        return sum(self.n_batches.values())

    def __iter__(self) -> Iterator[Batch]:
        """Yield the rest of the current epoch (from `position`), then move to the next epoch."""
        plan = self.plan(self.epoch)
        while self.position < len(plan):
            batch = plan[self.position]
            self.position += 1
            yield batch
        self.epoch += 1
        self.position = 0

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning, unless already positioned inside it (after a resume)."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict[str, Any]:
        """Plain values: where iteration stands, and what the plan depends on (checked on load).

        `position` counts batches yielded; a DataLoader with worker prefetch pulls ahead of the
        training step, so iterate this sampler directly (or with num_workers=0) for exact resume.
        """
        state = {"epoch": self.epoch, "position": self.position, "seed": self.seed, "strategy": self.strategy,
                 "batch_size": self.batch_size, "tasks": list(self.tasks), "epoch_batches": len(self)}
        if self.mixer.uses_run_length:
            state["run_batches"] = self.run_batches
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue at the batch after the last one yielded when `state` was taken."""
        mine = self.state_dict()
        for key in ("seed", "strategy", "batch_size", "tasks", "epoch_batches", "run_batches"):
            if key in state and state[key] != mine.get(key):
                raise ValueError(f"sampler state does not match this run: {key} {state[key]!r} != {mine.get(key)!r}")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    def task_counts(self, epoch: int | None = None) -> dict[str, int]:
        """Batches per task in the plan of `epoch` (default: the current one)."""
        counts = Counter(task for task, _ in self.plan(self.epoch if epoch is None else epoch))
        return {t: counts.get(t, 0) for t in self.tasks}

    def plan(self, epoch: int) -> list[Batch]:
        """The whole batch plan of `epoch` (cached for the latest epoch asked for)."""
        if self._plan_cache is None or self._plan_cache[0] != epoch:
            self._plan_cache = (epoch, self._build_plan(epoch))
        return self._plan_cache[1]

    # -------------------------------------------------------------------------------- internals

    def _batches_per_pass(self, n: int) -> int:
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _rng(self, *key: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *key])

    def _task_pass(self, task: str, rng: np.random.Generator) -> list[list[int]]:
        """One pass over a task: shuffled, length-bucketed batches in shuffled order."""
        lengths = self.lengths[task]
        order = rng.permutation(len(lengths)) if self.shuffle else np.arange(len(lengths))
        if self.drop_last:  # drop random examples, not the longest of the last window
            order = order[: len(order) // self.batch_size * self.batch_size]
        # equal windows of about batch_size × bucket_multiplier (no small remainder window),
        # each a whole number of batches so that only the task's last batch can be short
        n_batches = -(-len(order) // self.batch_size)
        n_windows = max(1, round(n_batches / self.bucket_multiplier[task]))
        cuts = np.linspace(0, n_batches, n_windows + 1).round().astype(int) * self.batch_size
        batches: list[np.ndarray] = []
        for start, stop in zip(cuts[:-1], cuts[1:]):
            chunk = order[start:stop]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            batches.extend(chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size))
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return [b.tolist() for b in batches]

    def _stream(self, task: str, epoch: int) -> Iterator[list[int]]:
        """A task's batches for one epoch: pass 0, then freshly reshuffled passes as needed."""
        ti = self.tasks.index(task)
        cycle = 0
        while True:
            yield from self._task_pass(task, self._rng(epoch, _TASK, ti, cycle))
            cycle += 1

    def task_pass(self, task: str, epoch: int, cycle: int = 0) -> list[list[int]]:
        """Pass `cycle` of `epoch` over one task's examples (seeded, so the same on every process)."""
        return self._task_pass(task, self._rng(epoch, _TASK, self.tasks.index(task), cycle))

    def draw_tasks(self, epoch: int, probabilities: np.ndarray) -> list[Batch]:
        """`len(self)` steps, each drawing a task and taking its stream's next batch: with the same
        `probabilities` (one per task) at every step, or with row i at step i (shape steps × tasks)."""
        rng = self._rng(epoch, _PLAN)
        if probabilities.ndim == 1:
            draws = rng.choice(len(self.tasks), size=len(self), p=probabilities)
        else:  # inverse CDF of each step's own distribution
            cumulative = np.cumsum(probabilities, axis=1)
            draws = np.minimum((cumulative < rng.random((len(self), 1)) * cumulative[:, -1:]).sum(axis=1),
                               len(self.tasks) - 1)
        streams = {t: self._stream(t, epoch) for t in self.tasks}
        return [(self.tasks[i], next(streams[self.tasks[i]])) for i in draws.tolist()]

    def _build_plan(self, epoch: int) -> list[Batch]:
        plan = self.mixer.plan(self, epoch)
        if self.shuffle and self.mixer.shuffle_plan:
            order = self._rng(epoch, _PLAN).permutation(len(plan))
            plan = [plan[i] for i in order]
        return plan



def shard(indices: Sequence[int], rank: int, world_size: int) -> list[int]:
    """This rank's contiguous slice of a batch (sizes differ by at most one).

    A batch smaller than `world_size` is repeated cyclically first, so no rank gets nothing.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    items = list(indices)
    if len(items) < world_size:
        items = [items[i % len(items)] for i in range(world_size)]
    base, extra = divmod(len(items), world_size)
    start = rank * base + min(rank, extra)
    return items[start : start + base + (rank < extra)]


def padding_fraction(
    batches: Iterable[Batch], lengths: Mapping[str, Sequence[int]], pad_to_multiple_of: int | None = None,
    packed: Collection[str] = (),
) -> float:
    """Share of padded positions when each batch is padded to its longest example (rounded up),
    or, for the `packed` tasks, packed into rows (`mtbio.data.packing`)."""
    real = padded = 0
    arrays = {t: np.asarray(v) for t, v in lengths.items()}
    for task, indices in batches:
        batch = arrays[task][indices]
        width, rows = packed_width_and_rows(batch.tolist()) if task in packed else (int(batch.max()), len(batch))
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        real += int(batch.sum())
        padded += width * rows
    return 1.0 - real / padded if padded else 0.0


def split_by_length(indices: Sequence[int], lengths: Sequence[int], parts: int) -> list[list[int]]:
    """`indices` sorted by length and cut into `parts` contiguous groups (fewer if there are fewer
    examples) that minimise the padded tokens, sum over groups of (longest length × group size).

    Running a batch as these sub-batches, with their gradients added, gives the whole batch's
    gradient at a fraction of its padding (`--sub-batches`).
    """
    order = sorted(indices, key=lambda i: lengths[i])
    n, parts = len(order), max(1, min(parts, len(order)))
    sizes = np.asarray([lengths[i] for i in order], dtype=np.float64)
    # cost[j][i]: least padded tokens for the first i examples in j groups; the last group is
    # order[m:i], padded to sizes[i-1], so cost[j][i] = min over m of cost[j-1][m] + sizes[i-1]·(i-m)
    previous = np.full(n + 1, np.inf)
    previous[0] = 0.0
    cuts = np.zeros((parts + 1, n + 1), dtype=np.int64)
    end = np.arange(n + 1)
    width = np.concatenate([[1.0], sizes])[:, None]  # row i >= 1: the group ending at i is padded to sizes[i-1]
    span = (end[:, None] - end[None, :]).astype(np.float64)
    span[span < 1] = np.inf  # a group holds at least one example
    for j in range(1, parts + 1):
        candidate = previous[None, :] + width * span
        cuts[j] = candidate.argmin(axis=1)
        previous = candidate.min(axis=1)
    groups, stop = [], n
    for j in range(parts, 0, -1):
        start = int(cuts[j][stop])
        groups.append(order[start:stop])
        stop = start
    return groups[::-1]
