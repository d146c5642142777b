"""Resumable sweeps of training runs (shared by `mtbio pairwise` and `mtbio stilt`).

A sweep is a directory of cells; a cell is one ordinary training run (one `train_tasks` call)
for one seed, in its own sub-directory:

    <sweep>/
        sweep.json                      the options every cell was trained with (checked on rerun)
        baselines/<task>/seed-<s>/      single-task run (shared by pairwise and stilt)
        pairs/<a>+<b>/seed-<s>/         two-task refinement run (pairwise)
        transfer/<i>-to-<t>/seed-<s>/   target t fine-tuned from baselines/<i>/seed-<s>/encoder (stilt)

A cell is finished when its `results.json` exists (written last by `train_tasks`). Rerunning a
sweep skips finished cells, removes the directory of an unfinished cell (killed mid-run) and
trains it again, so a killed sweep loses at most the cell in progress. Finished cells drop their
resume checkpoints (the best-dev weights, results and metrics stay).
"""
from __future__ import annotations

import json
import math
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from accelerate import Accelerator

from mtbio.errors import MtbioError
from mtbio.experiments.training_run import train_tasks
from mtbio.tasks.loading import missing_message, missing_paths
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import RunConfig
from mtbio.training.trainer import build_sampler, make_accelerator, run_length

# Used by --dry-run before any cell of the sweep has finished: MiniLM-L6, fp32, two CPU cores,
# dynamic padding (see shared/docs/cpu-stack.md: 8-26 examples/s training, 37-114 inference).
DEFAULT_TRAIN_EXAMPLES_PER_SECOND = 15.0
DEFAULT_EVAL_EXAMPLES_PER_SECOND = 60.0

# Options that do not change what one cell trains: they are not part of the sweep's protocol.
NOT_PROTOCOL = {"tasks", "domain", "output", "data_dir", "task_defs", "seed", "seeds", "dry_run", "alpha",
                "min_delta", "resume", "from_run", "intermediate", "target", "affinity_every", "affinity_batch_size",
                "affinity_split", "prune", "affinity", "prune_by"}


@dataclass(frozen=True)
class Cell:
    """One training run of a sweep: `tasks` trained together from `encoder_source`, one seed."""

    kind: str  # baseline | pair | transfer
    tasks: tuple[str, ...]
    seed: int
    run_dir: Path
    stage: str
    lr: float
    from_cell: Path | None = None  # transfer: the intermediate run whose encoder is the start

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.json"

    @property
    def done(self) -> bool:
        return self.results_path.is_file()

    def describe(self) -> str:
        what = {"baseline": f"baseline {self.tasks[0]}", "pair": f"pair {' + '.join(self.tasks)}",
                "transfer": f"transfer {self.from_cell.parent.name if self.from_cell else '?'} → {self.tasks[0]}"}
        return f"{what.get(self.kind, self.kind)}, seed {self.seed}"


DEFAULT_SEEDS = 3


def seeds_of(config: RunConfig) -> list[int]:
    """`--seeds K` (default 3) runs seeds seed, seed+1, ..., seed+K-1 (`--seed` defaults to 42)."""
    return [config.seed + i for i in range(config.seeds or DEFAULT_SEEDS)]


def baseline_cell(sweep_dir: Path, task: str, seed: int, lr: float) -> Cell:
    return Cell("baseline", (task,), seed, sweep_dir / "baselines" / task / f"seed-{seed}", "single-task", lr)


def read_results(cell: Cell) -> dict[str, Any]:
    try:
        return json.loads(cell.results_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MtbioError(f"{cell.results_path}: cannot read ({exc}); delete the cell directory and rerun") from None


def cell_score(cell: Cell, task: TaskDef, split: str = "dev") -> float | None:
    """The task's primary metric in a finished cell (None if the split was not scored)."""
    scores = read_results(cell).get(split, {}).get(task.name)
    return None if scores is None else float(scores[task.metric])


def check_data(tasks: list[TaskDef], data_dir: Path | None) -> None:
    """Refuse a sweep up front when any task lacks data: one line per task, saying where the files go."""
    if data_dir is None:
        raise MtbioError("no data directory; pass --data-dir or set MTBIO_DATA_DIR")
    if not data_dir.is_dir():
        raise MtbioError(f"data directory not found: {data_dir}")
    lines = []
    for task in tasks:
        missing = missing_paths(task, data_dir)
        if missing:
            lines.append(f"task '{task.name}': {missing_message(task, missing)}")
    if lines:
        raise MtbioError("\n".join(lines))


def protocol(config: RunConfig) -> dict[str, Any]:
    """The options that decide what a cell trains (compared when a sweep directory is reused)."""
    return {k: v for k, v in config.model_dump(mode="json").items() if k not in NOT_PROTOCOL}


def check_protocol(sweep_dir: Path, config: RunConfig) -> None:
    """A sweep directory's cells must all come from the same options (read-only; every process)."""
    path = sweep_dir / "sweep.json"
    if not path.is_file():
        return
    saved = json.loads(path.read_text()).get("protocol", {})
    current = protocol(config)
    changed = [f"{k}: {saved.get(k)!r} there, {current.get(k)!r} now" for k in sorted(set(saved) | set(current))
               if saved.get(k) != current.get(k)]
    if changed:
        raise MtbioError(f"{sweep_dir} holds cells trained with other options ({'; '.join(changed)}); "
                         "use the same options or another --output")


def record_protocol(sweep_dir: Path, config: RunConfig) -> None:
    """Write sweep.json on first use of a sweep directory (main process only)."""
    path = sweep_dir / "sweep.json"
    if not path.is_file():
        sweep_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"protocol": protocol(config)}, indent=2) + "\n")


def cell_config(config: RunConfig, cell: Cell) -> RunConfig:
    """The run configuration of one cell (recorded in its config.yaml)."""
    update: dict[str, Any] = {"tasks": list(cell.tasks), "domain": None, "seed": cell.seed,
                              "output": str(cell.run_dir), "resume": False, "intermediate": [], "target": []}
    if cell.from_cell is not None:
        update.update(from_run=str(cell.from_cell), encoder=None)
    return config.model_copy(update=update)


def processes(config: RunConfig) -> Accelerator:
    """The process group of this sweep: created the way every cell creates it (CPU processes talk
    over gloo), before anything asks which process is the main one."""
    if config.resume:
        raise MtbioError("--resume: a sweep resumes by itself (run the same command again); leave --resume out")
    return make_accelerator(config.mixed_precision)


def run_cells(cells: list[Cell], config: RunConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
              state: Accelerator, echo: Callable[[str], None] = print) -> int:
    """Train every unfinished cell in order; returns how many were trained.

    Under `accelerate launch` every process walks the same list; the main process cleans
    unfinished cell directories and writes files, and each cell is one distributed run.
    """
    pending = [c for c in cells if not c.done]
    state.wait_for_everyone()  # every process has decided what to run before anything is removed
    if state.is_main_process:
        for cell in pending:
            if cell.run_dir.exists():
                echo(f"removing unfinished cell {cell.run_dir}")
                shutil.rmtree(cell.run_dir)
    state.wait_for_everyone()
    for number, cell in enumerate(pending, 1):
        echo(f"[{number}/{len(pending)}] {cell.describe()} → {cell.run_dir}")
        encoder = str(cell.from_cell / "encoder") if cell.from_cell is not None else config.encoder
        if cell.from_cell is not None and not (cell.from_cell / "results.json").is_file():
            raise MtbioError(f"{cell.from_cell}: the intermediate run is not finished")
        train_tasks([catalog[t] for t in cell.tasks], cell_config(config, cell), cell.run_dir, encoder, cell.lr,
                    cell.stage, data_dir)
        state.wait_for_everyone()  # results.json is on disk before any process reads it
        if state.is_main_process:
            shutil.rmtree(cell.run_dir / "checkpoints", ignore_errors=True)
    return len(pending)


# ---- --dry-run: what would run and how long it would take ----------------------------------------
@dataclass
class CellWork:
    """Examples a cell trains on and scores (the input of the time estimate)."""

    train_examples: int
    eval_examples: int


def cell_work(cell: Cell, config: RunConfig, sizes: dict[str, dict[str, int]]) -> CellWork:
    """Training examples seen and evaluation examples scored by one cell."""
    run = cell_config(config, cell)
    counts = {t: int(min(sizes[t].get("train", 0), config.max_train_examples or math.inf)) for t in cell.tasks}
    # the trainer's own batch plan, on stand-in lengths (only the counts decide its length)
    plan = build_sampler(run, {t: [1] * max(n, 1) for t, n in counts.items()}).plan(0)
    steps_per_epoch, total_steps = run_length(run, len(plan))
    epoch_examples = sum(len(indices) for _, indices in plan)
    train = (epoch_examples * total_steps) // steps_per_epoch
    evaluations = math.ceil(total_steps / config.eval_every) if config.eval_every else math.ceil(total_steps / steps_per_epoch)
    dev = sum(sizes[t].get("dev", 0) for t in cell.tasks)
    test = sum(sizes[t].get("test", 0) for t in cell.tasks) if config.eval_test else 0
    return CellWork(train, max(1, evaluations) * dev + test)


@dataclass
class Rates:
    train: float
    eval: float
    basis: str


def measured_rates(cells: list[Cell], config: RunConfig, sizes: dict[str, dict[str, int]]) -> Rates:
    """Training rate: median `train_examples_per_second` of finished cells; evaluation rate: their
    evaluation examples over the wall time not spent training. Defaults when nothing finished."""
    finished = [c for c in cells if c.done]
    train_rates, eval_examples, eval_seconds = [], 0, 0.0
    for cell in finished:
        results = read_results(cell)
        rate = float(results.get("train_examples_per_second", 0))
        if rate <= 0:
            continue
        train_rates.append(rate)
        work = cell_work(cell, config, sizes)
        left = float(results.get("wall_seconds", 0)) - work.train_examples / rate
        if left > 0:
            eval_examples += work.eval_examples
            eval_seconds += left
    if not train_rates:
        return Rates(DEFAULT_TRAIN_EXAMPLES_PER_SECOND, DEFAULT_EVAL_EXAMPLES_PER_SECOND,
                     f"default rates ({DEFAULT_TRAIN_EXAMPLES_PER_SECOND:g} train / "
                     f"{DEFAULT_EVAL_EXAMPLES_PER_SECOND:g} eval examples/s; nothing has finished yet)")
    train = statistics.median(train_rates)
    evaluation = eval_examples / eval_seconds if eval_seconds > 0 and eval_examples else DEFAULT_EVAL_EXAMPLES_PER_SECOND
    return Rates(train, evaluation, f"measured on {len(train_rates)} finished cell(s): {train:.1f} train / "
                                    f"{evaluation:.1f} eval examples/s")


def dry_run_report(cells: list[Cell], config: RunConfig, catalog: dict[str, TaskDef], data_dir: Path) -> str:
    """The cells a sweep would train, each with its estimated time, and the total."""
    from mtbio.data.loading import split_sizes

    names = sorted({t for c in cells for t in c.tasks})
    sizes = {name: split_sizes(catalog[name], data_dir) for name in names}
    rates = measured_rates(cells, config, sizes)
    pending = [c for c in cells if not c.done]
    lines = [f"{len(cells)} cells, {len(cells) - len(pending)} finished, {len(pending)} to run"]
    total = 0.0
    for cell in pending:
        work = cell_work(cell, config, sizes)
        seconds = work.train_examples / rates.train + work.eval_examples / rates.eval
        total += seconds
        lines.append(f"  {cell.describe():48s} {work.train_examples:7d} train + {work.eval_examples:6d} eval examples "
                     f"~{format_duration(seconds)}  {cell.run_dir}")
    lines.append(f"estimated time: ~{format_duration(total)} ({rates.basis}; loading data and models not counted)")
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
