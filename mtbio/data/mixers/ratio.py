"""`ratio`: all of `main_task`'s batches once, plus round(ratio × that) auxiliary batches drawn
without replacement (cycling if needed) from the pooled batches of the other tasks, so each
auxiliary task contributes in proportion to its size; merged and shuffled."""
from __future__ import annotations

from pydantic import Field

from mtbio.data.mixer import _AUX, _TASK, Batch, MixerOptions, MultiTaskBatchSampler, register_mixer


class RatioOptions(MixerOptions):
    main_task: str = Field(description="the task the auxiliaries serve")
    ratio: float = Field(1.0, ge=0, description="auxiliary batches per main-task batch")


def _epoch_batches(sampler: MultiTaskBatchSampler) -> int:
    main = sampler.n_batches[sampler.options.main_task]
    return main + round(sampler.options.ratio * main)


def _check(sampler: MultiTaskBatchSampler) -> None:
    if sampler.options.main_task not in sampler.lengths:
        raise ValueError(f"strategy 'ratio' needs main_task to be one of the tasks, got {sampler.options.main_task!r}")
    if len(sampler.lengths) < 2:
        raise ValueError("strategy 'ratio' needs auxiliary tasks")


def _aux_batches(sampler: MultiTaskBatchSampler, epoch: int, count: int) -> list[Batch]:
    """`count` batches drawn without replacement from the pooled auxiliary batches (cycling)."""
    out: list[Batch] = []
    cycle = 0
    while len(out) < count:
        pool = [(t, b) for ti, t in enumerate(sampler.tasks) if t != sampler.options.main_task
                for b in sampler._task_pass(t, sampler._rng(epoch, _TASK, ti, cycle))]
        pick = sampler._rng(epoch, _AUX, cycle).permutation(len(pool))[: count - len(out)]
        out += [pool[i] for i in pick]
        cycle += 1
    return out


@register_mixer("ratio", options=RatioOptions, epoch_batches=_epoch_batches, check=_check)
def ratio(sampler: MultiTaskBatchSampler, epoch: int) -> list[Batch]:
    """All of the main task's batches, plus ratio × as many auxiliary batches."""
    main = sampler.options.main_task
    plan = [(main, b) for b in sampler.task_pass(main, epoch)]
    return plan + _aux_batches(sampler, epoch, len(sampler) - len(plan))
