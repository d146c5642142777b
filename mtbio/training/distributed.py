"""What keeps several training processes (`accelerate launch --num_processes N`) in step.

Every process builds the same seeded batch plan and runs the same task at each step on its own
slice of the batch (`mtbio.data.mixer.shard`). Decisions that change the control flow — skip a
batch with a non-finite loss, stop after a signal, which weights are best — must be the same
on every process, or one process would wait forever in a collective the others never enter.
The helpers here make such decisions global. With one process they cost nothing.

Evaluation is sharded: each process predicts every k-th evaluation batch, the predictions are
gathered (`gather_for_metrics`) and every process scores all of them, so the trainer state is
identical everywhere and no prediction is counted twice.

`MTBIO_DEBUG_TASK_LOG=PATH` makes each process append `step<TAB>task<TAB>uids` lines, one per
micro-batch, to `PATH.rank<k>` (used by the multi-process test to show every rank ran the same
task on a different slice).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather

from mtbio.fileio import open_for_write

T = TypeVar("T")

TASK_LOG_ENV = "MTBIO_DEBUG_TASK_LOG"


def all_processes(accelerator: Accelerator, flag: bool) -> bool:
    """True only if `flag` is true on every process (a collective: call it on all of them)."""
    return min_over_processes(accelerator, int(flag)) > 0


def any_process(accelerator: Accelerator, flag: bool) -> bool:
    """True if `flag` is true on at least one process (a collective: call it on all of them)."""
    return not all_processes(accelerator, not flag)


def on_main_then_share(accelerator: Accelerator, compute: Callable[[], T]) -> T:
    """Run `compute` on the main process only and give its (picklable) result to every process."""
    if accelerator.num_processes == 1:
        return compute()
    box: list[Any] = [compute() if accelerator.is_main_process else None]
    broadcast_object_list(box, from_process=0)
    return box[0]


def log_micro_batch(accelerator: Accelerator, step: int, task: str, uids: Sequence[str]) -> None:
    """Append one line to this process's task log when MTBIO_DEBUG_TASK_LOG is set."""
    target = os.environ.get(TASK_LOG_ENV)
    if not target:
        return
    path = Path(f"{target}.rank{accelerator.process_index}")
    with open_for_write(path, "a") as handle:
        handle.write(f"{step}\t{task}\t{','.join(uids)}\n")


def min_over_processes(accelerator: Accelerator, value: int) -> int:
    """The smallest of every process's `value` (a collective: call it on all of them)."""
    if accelerator.num_processes == 1:
        return value
    return int(gather(torch.tensor([value], device=accelerator.device)).min().item())
