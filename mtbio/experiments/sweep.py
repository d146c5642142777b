"""Resumable sweeps of training runs (shared by `mtbio pairwise` and `mtbio stilt`).

A sweep is a directory of cells; a cell is one ordinary training run (one `train_tasks` call)
for one seed, in its own sub-directory:

    <sweep>/
        sweep.json                      the options every cell was trained with (checked on rerun)
        cells.json                      every cell any launcher was asked for (read by `mtbio sweep status`)
        cells.jsonl                     every finished cell, one a line, written with the summary (`pack_cells`)
        baselines/<task>/seed-<s>/      single-task run (shared by pairwise and stilt)
        pairs/<a>+<b>/seed-<s>/         two-task refinement run (pairwise)
        transfer/<i>-to-<t>/seed-<s>/   target t fine-tuned from baselines/<i>/seed-<s>/encoder (stilt)
        .../seed-<s>.lock               the cell's owner while it trains (`cell_locks`)
        .../seed-<s>.failed.json        the cell's failed attempts

A cell is finished when its `results.json` exists (written last by `train_tasks`), or when its folder is gone and
cells.jsonl keeps it (a committed study). Any number of
processes may work through one sweep directory: each claims a cell with its lock before touching
it, so an unfinished cell is continued from its last checkpoint only by the process that took over
its stale lock (owner gone), and a killed sweep loses at most the steps since its cells' last
checkpoints. Finished cells drop their resume checkpoints and, with `--keep-weights none` (the
default), their weights; a STILT intermediate keeps its encoder until its targets finish.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from accelerate import Accelerator

from mtbio.errors import MtbioError
from mtbio.experiments.cell_locks import claim, failed_out, failures, record_failure
from mtbio.experiments.common import train_examples_of
from mtbio.experiments.layout import local_layout
from mtbio.experiments.study_config import run_options_of
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.training_run import train_tasks
from mtbio.fileio import write_json
from mtbio.reporting.studies import cell_description
from mtbio.run_dir import RunDir, SweepDir, saved_cell
from mtbio.tasks.loading import missing_message, missing_paths
from mtbio.tasks.schema import TaskDef
from mtbio.training.affinity import AffinityProbe
from mtbio.training.checkpoint import latest_checkpoint, listener_states
from mtbio.training.config import RunConfig, flat_fields, flat_values, protocol_options, upgrade_retired
from mtbio.training.distributed import on_main_then_share
from mtbio.training.trainer import StopRequested, TrainerOptions, build_sampler, make_accelerator, run_length

# Used by --dry-run before any cell of the sweep has finished: MiniLM-L6, fp32, two CPU cores,
# dynamic padding (see shared/docs/cpu-stack.md: 8-26 examples/s training, 37-114 inference).
DEFAULT_TRAIN_EXAMPLES_PER_SECOND = 15.0
DEFAULT_EVAL_EXAMPLES_PER_SECOND = 60.0

POLL_SECONDS = 2.0  # how often a launcher looks again at cells other processes hold


@dataclass(frozen=True)
class Cell:
    """One training run of a sweep: `tasks` trained together from `encoder_source`, one seed."""

    kind: str  # baseline | pair | transfer | joint (a refine run measuring task affinity) | refined (a refine run)
    tasks: tuple[str, ...]
    seed: int
    run_dir: Path
    stage: str
    lr: float
    from_cell: Path | None = None  # transfer: the intermediate run whose encoder is the start
    max_train_examples: int | None = None  # the cell's own training size (None: the sweep's --max-train-examples)

    @property
    def results_path(self) -> Path:
        return RunDir(self.run_dir).results_file

    @property
    def done(self) -> bool:
        """Finished: its directory has results.json, or, the directory gone, its study's cells.jsonl keeps it."""
        return saved_cell(self.run_dir) is not None

    def describe(self) -> str:
        """What the cell is (as the study declaring its kind says it), its own training size and its seed."""
        size = f", {self.max_train_examples} examples" if self.max_train_examples is not None else ""
        return f"{cell_description(self)}{size}, seed {self.seed}"


DEFAULT_SEEDS = 3


def seeds_of(config: StudyConfig) -> list[int]:
    """`--seeds K` (default 3) runs seeds seed, seed+1, ..., seed+K-1 (`--seed` defaults to 42)."""
    return [config.seed + i for i in range(config.seeds or DEFAULT_SEEDS)]


def baseline_cell(sweep_dir: Path, task: str, seed: int, lr: float) -> Cell:
    return Cell("baseline", (task,), seed, sweep_dir / "baselines" / task / f"seed-{seed}", "single-task", lr)


def cell_results(cell: Cell) -> dict[str, Any]:
    """A finished cell's results.json (from its directory, or from its study's cells.jsonl once that is gone)."""
    try:
        return (saved_cell(cell.run_dir) or RunDir(cell.run_dir)).results()
    except MtbioError as exc:
        raise MtbioError(f"{exc}; delete the cell directory and rerun") from None


def cell_score(cell: Cell, task: TaskDef, split: str = "dev") -> float | None:
    """The task's primary metric in a finished cell (None if the split was not scored)."""
    scores = cell_results(cell).get(split, {}).get(task.name)
    return None if scores is None else float(scores[task.metric])


def baseline_trivial(cells: list[Cell]) -> dict[str, float]:
    """Each baseline task's trivial dev score, as its finished baseline cells recorded it."""
    found: dict[str, float] = {}
    for cell in cells:
        if cell.kind == "baseline" and cell.done:
            value = cell_results(cell).get("trivial", {}).get(cell.tasks[0])
            if value is not None:
                found[cell.tasks[0]] = float(value)
    return found


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
            lines.append(f"task '{task.name}': {missing_message(task, missing, data_dir)}")
    if lines:
        raise MtbioError("\n".join(lines))


def protocol(config: StudyConfig) -> dict[str, Any]:
    """The options that decide what a cell trains (compared when a sweep directory is reused): the
    training options not set per cell (`protocol_options`, from the fields' declarations)."""
    values = flat_values(config.model_dump(mode="json"), RunConfig)
    return {k: values[k] for k in protocol_options()}


def check_protocol(sweep_dir: Path, config: StudyConfig) -> None:
    """A sweep directory's cells must all come from the same options (read-only; every process)."""
    path = SweepDir(sweep_dir).protocol_file
    if not path.is_file():
        return
    current = protocol(config)
    # an option recorded before it left the protocol (it does not change what a cell trains) is not compared; one
    # recorded before its component owned it is read as that component's option
    recorded = flat_values(upgrade_retired(json.loads(path.read_text()).get("protocol", {})), RunConfig)
    saved = {k: v for k, v in recorded.items() if k in current}
    # an option added to mtbio after the sweep was recorded was trained as if at its field default (what it leaves
    # off), not at today's recipe value
    fields = flat_fields(RunConfig)
    defaults = {k: fields[k].get_default(call_default_factory=True) for k in protocol_options()}
    saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
    changed = [f"{k}: {saved.get(k)!r} there, {current.get(k)!r} now" for k in sorted(set(saved) | set(current))
               if saved.get(k) != current.get(k)]
    if changed:
        raise MtbioError(f"{sweep_dir} holds cells trained with other options ({'; '.join(changed)}); "
                         "use the same options or another --output")


def record_protocol(sweep_dir: Path, config: StudyConfig) -> None:
    """Write sweep.json on first use of a sweep directory (main process only)."""
    path = SweepDir(sweep_dir).protocol_file
    if not path.is_file():
        write_json(path, {"protocol": protocol(config)})


def declare_metrics(sweep_dir: Path, metrics: dict[str, str]) -> None:
    """Write declared.json (task → primary metric) before the sweep's first cell trains; kept once written."""
    path = sweep_dir / "declared.json"
    if not path.is_file():
        write_json(path, {"primary_metric": metrics})


def cell_config(config: StudyConfig, cell: Cell) -> RunConfig:
    """The run configuration of one cell (recorded in its config.yaml): the study's run options, for its cell."""
    update: dict[str, Any] = {"tasks": list(cell.tasks), "domain": None, "seed": cell.seed,
                              "output": str(cell.run_dir), "resume": False}
    if cell.from_cell is not None:
        update.update(from_run=str(cell.from_cell), encoder=None)
    if cell.max_train_examples is not None:
        update["max_train_examples"] = cell.max_train_examples
    return run_options_of(config, **update)


def processes(config: StudyConfig) -> Accelerator:
    """The process group of this sweep: created the way every cell creates it (CPU processes talk
    over gloo), before anything asks which process is the main one."""
    if config.resume:
        raise MtbioError("--resume: a sweep resumes by itself (run the same command again); leave --resume out")
    return make_accelerator(config.mixed_precision)


def record_cells(sweep_dir: Path, cells: list[Cell]) -> None:
    """Add the cells to cells.json (the list `mtbio sweep status` shows), replacing the file atomically.
    Paths are written relative to the sweep directory, so a committed or moved sweep still reads."""
    path = SweepDir(sweep_dir).cells_file
    try:
        known = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        known = []
    seen = {entry["run_dir"] for entry in known}
    for cell in cells:
        run_dir = _relative(cell.run_dir, sweep_dir)
        if run_dir not in seen:
            known.append({"kind": cell.kind, "tasks": list(cell.tasks), "seed": cell.seed, "run_dir": run_dir,
                          "stage": cell.stage, "lr": cell.lr,
                          "from_cell": _relative(cell.from_cell, sweep_dir) if cell.from_cell is not None else None,
                          **({"max_train_examples": cell.max_train_examples}
                             if cell.max_train_examples is not None else {})})
    write_json(path, known)


def _relative(path: Path, sweep_dir: Path) -> str:
    return os.path.relpath(path, sweep_dir)


def read_cells(sweep_dir: Path) -> list[Cell]:
    """The cells recorded in cells.json; for a sweep written before mtbio kept that file, the cells
    found on disk."""
    try:
        entries = json.loads(SweepDir(sweep_dir).cells_file.read_text())
    except FileNotFoundError:
        found = discover_cells(sweep_dir)
        if not found:
            raise MtbioError(f"{sweep_dir}: no cells.json and no cell directories; is this a sweep directory?") from None
        return found
    return [Cell(e["kind"], tuple(e["tasks"]), int(e["seed"]), sweep_dir / e["run_dir"], e["stage"], float(e["lr"]),
                 sweep_dir / e["from_cell"] if e.get("from_cell") else None, e.get("max_train_examples"))
            for e in entries]


CELL_FOLDERS = {"baselines": ("baseline", "single-task"), "pairs": ("pair", "refine"), "transfer": ("transfer", "finetune")}


def discover_cells(sweep_dir: Path) -> list[Cell]:
    """Every `<baselines|pairs|transfer>/<name>/seed-<s>/` directory as a cell (its learning rate unknown: 0)."""
    cells = []
    for folder, (kind, stage) in CELL_FOLDERS.items():
        for run_dir in sorted((sweep_dir / folder).glob("*/seed-*")):
            if not run_dir.is_dir() or not run_dir.name[5:].isdigit():
                continue
            name, seed = run_dir.parent.name, int(run_dir.name[5:])
            source, _, target = name.partition("-to-")
            tasks = tuple(name.split("+")) if kind == "pair" else (target,) if kind == "transfer" else (name,)
            from_cell = sweep_dir / "baselines" / source / run_dir.name if kind == "transfer" else None
            cells.append(Cell(kind, tasks, seed, run_dir, stage, 0.0, from_cell))
    return cells


# ---- weights a cell keeps --------------------------------------------------------------------------
def has_weights(run_dir: Path) -> bool:
    return any(RunDir(run_dir).encoder_dir.glob("*.safetensors"))


def dependents(cell: Cell, cells: list[Cell]) -> list[Cell]:
    """The transfer cells that start from this cell's encoder."""
    return [c for c in cells if c.from_cell == cell.run_dir]


def needs_training(cell: Cell, cells: list[Cell]) -> bool:
    """Not finished, or an intermediate whose weights were dropped while a target still needs them."""
    if not cell.done:
        return True
    return not has_weights(cell.run_dir) and any(not d.done for d in dependents(cell, cells))


def drop_weights(run_dir: Path) -> None:
    """Remove a finished cell's encoder directory and head weights (scores, metrics, logs, configs stay)."""
    shutil.rmtree(RunDir(run_dir).encoder_dir, ignore_errors=True)
    for path in run_dir.glob("heads/*/model.safetensors"):
        path.unlink(missing_ok=True)


def tidy(cells: list[Cell], config: StudyConfig) -> None:
    """Drop weights no cell of this sweep will read (`--keep-weights none`)."""
    if config.keep_weights == "best":
        return
    for cell in cells:
        if cell.kind == "refined":  # a transfer sweep's refined encoders are what it studies: kept
            continue
        if cell.done and has_weights(cell.run_dir) and all(d.done for d in dependents(cell, cells)):
            drop_weights(cell.run_dir)


# ---- working through the cells -------------------------------------------------------------------
def unsettled(cells: list[Cell], all_cells: list[Cell], retries: int) -> list[Cell]:
    """Cells that still need training and have attempts left (their intermediate too)."""
    def blocked(cell: Cell) -> bool:
        return cell.from_cell is not None and failed_out(cell.from_cell, retries)
    return [c for c in cells if needs_training(c, all_cells) and not failed_out(c.run_dir, retries) and not blocked(c)]


def failed_cells(cells: list[Cell], retries: int) -> list[Cell]:
    """Cells that did not finish and have used up their attempts (or whose intermediate has)."""
    return [c for c in cells if not c.done and (failed_out(c.run_dir, retries)
                                                or (c.from_cell is not None and failed_out(c.from_cell, retries)))]


def _claim_next(cells: list[Cell], all_cells: list[Cell], config: StudyConfig) -> tuple[int | None, Any, bool]:
    """(index, lock) of the first cell this process could claim; the flag says whether any cell is left."""
    left = unsettled(cells, all_cells, config.retries)
    for cell in left:
        if cell.from_cell is not None and not (RunDir(cell.from_cell).finished and has_weights(cell.from_cell)):
            continue  # its intermediate is not finished (or is trained again for its weights)
        lock = claim(cell.run_dir)
        if lock is None:
            continue
        if cell not in unsettled([cell], all_cells, config.retries):  # finished while we looked
            lock.release()
            continue
        return cells.index(cell), lock, True
    return None, None, bool(left)


def train_cell(cell: Cell, config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
               state: Accelerator) -> None:
    """Train one claimed cell: from the last checkpoint an interrupted owner left (a process killed, a session
    ended), else from scratch (what a failed attempt left is removed first)."""
    probe = config.predictor_spec()[1] if cell.kind == "joint" else None  # a joint predictor's options
    listeners = [AffinityProbe(probe.every, probe.batch_size, cell.seed, probe.split)] if probe is not None else []
    latest = None if failures(cell.run_dir) else latest_checkpoint(RunDir(cell.run_dir).checkpoints_dir)
    resume = (latest is not None and RunDir(cell.run_dir).config_file.is_file()
              and all(kept.state_key in listener_states(latest) for kept in listeners if kept.state_key))
    if state.is_main_process and cell.run_dir.exists() and not resume:
        shutil.rmtree(cell.run_dir)
    state.wait_for_everyone()
    encoder = str(RunDir(cell.from_cell).encoder_dir) if cell.from_cell is not None else config.encoder
    train_tasks([catalog[t] for t in cell.tasks], cell_config(config, cell).model_copy(update={"resume": resume}),
                cell.run_dir, encoder, cell.lr, cell.stage, data_dir, listeners=listeners)
    state.wait_for_everyone()  # results.json is on disk before any process reads it
    if state.is_main_process:
        shutil.rmtree(RunDir(cell.run_dir).checkpoints_dir, ignore_errors=True)


def work_through(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
                 state: Accelerator, echo: Callable[[str], None] = print, all_cells: list[Cell] | None = None) -> int:
    """Claim and train cells until none of `cells` is left to train; returns how many this process trained.

    Cells other processes hold are waited for (and taken over when their lock goes stale). A failed
    cell is recorded and tried again until `--retries` is used up. Under `accelerate launch` the main
    process claims and every process trains the claimed cell together.
    """
    all_cells = all_cells if all_cells is not None else cells
    trained = 0
    while True:
        lock: Any = None

        def decide() -> tuple[int | None, bool]:
            nonlocal lock
            index, lock, left = _claim_next(cells, all_cells, config)
            return index, left

        index, left = on_main_then_share(state, decide)
        if index is None:
            if not left:
                return trained
            time.sleep(POLL_SECONDS)
            continue
        cell = cells[index]
        echo(f"[{all_cells.index(cell) + 1}/{len(all_cells)}] {cell.describe()} → {cell.run_dir}")
        try:
            train_cell(cell, config, catalog, data_dir, state)
            trained += 1
        except (StopRequested, KeyboardInterrupt):
            raise
        except Exception as exc:  # recorded and retried; the sweep goes on with the other cells
            if state.is_main_process:
                record_failure(cell.run_dir, exc)
                attempts = len(failures(cell.run_dir))
                echo(f"failed ({attempts} of {config.retries + 1} attempts): {cell.describe()}: {exc}")
        finally:
            if lock is not None:
                lock.release()
        if state.is_main_process:
            tidy(all_cells, config)


def write_summary(sweep_dir: Path, write: Callable[[], list[Path]]) -> list[Path]:
    """Write the sweep's summary files under its summary lock (launchers finishing together take turns)."""
    while True:
        lock = claim(sweep_dir / "summary")
        if lock is not None:
            try:
                return write()
            finally:
                lock.release()
        time.sleep(0.2)


def failure_message(failed: list[Cell]) -> str:
    """One line per failed cell: what it is, its last error, and how to try it again."""
    lines = []
    for cell in failed:
        attempts = failures(cell.run_dir)
        why = attempts[-1]["error"] if attempts else f"its intermediate {cell.from_cell} failed"
        lines.append(f"{cell.describe()} failed ({why}); delete {cell.run_dir.name}.failed.json beside "
                     f"{cell.run_dir} and rerun to try again")
    return "\n".join(lines)


# ---- --dry-run: what would run and how long it would take ----------------------------------------
@dataclass
class CellWork:
    """Examples a cell trains on and scores (the input of the time estimate)."""

    train_examples: int
    eval_examples: int


def _epoch_plan(cell: Cell, config: StudyConfig,
                sizes: dict[str, dict[str, int]]) -> tuple[TrainerOptions, list[Any]]:
    """What the cell's trainer reads of its run options, and its batch plan of the first epoch, on stand-in lengths
    (only the training-set sizes decide its length; packed rows are not counted)."""
    run = cell_config(config, cell)
    counts = {t: int(min(sizes[t].get("train", 0), train_examples_of(run, t) or math.inf)) for t in cell.tasks}
    options = TrainerOptions.of(run)
    return options, build_sampler(options, {t: [1] * max(n, 1) for t, n in counts.items()}).plan(0)


def cell_steps(cell: Cell, config: StudyConfig, sizes: dict[str, dict[str, int]]) -> int:
    """The optimizer steps one cell will take (`sizes`: task → split → examples)."""
    options, plan = _epoch_plan(cell, config, sizes)
    return run_length(options, len(plan))[1]


def cell_work(cell: Cell, config: StudyConfig, sizes: dict[str, dict[str, int]]) -> CellWork:
    """Training examples seen and evaluation examples scored by one cell."""
    options, plan = _epoch_plan(cell, config, sizes)
    steps_per_epoch, total_steps = run_length(options, len(plan))
    epoch_examples = sum(len(indices) for _, indices in plan)
    train = (epoch_examples * total_steps) // steps_per_epoch
    evaluations = math.ceil(total_steps / config.eval_every) if config.eval_every else math.ceil(total_steps / steps_per_epoch)
    cap = config.max_eval_examples or math.inf
    dev = sum(int(min(sizes[t].get("dev", 0), cap)) for t in cell.tasks)
    test = sum(int(min(sizes[t].get("test", 0), cap)) for t in cell.tasks) if config.eval_test else 0
    return CellWork(train, max(1, evaluations) * dev + test)


@dataclass
class Rates:
    train: float
    eval: float
    basis: str


def measured_rates(cells: list[Cell], config: StudyConfig, sizes: dict[str, dict[str, int]]) -> Rates:
    """Training rate: median `train_examples_per_second` of finished cells; evaluation rate: their
    evaluation examples over the wall time not spent training. Defaults when nothing finished."""
    finished = [c for c in cells if c.done]
    train_rates, eval_examples, eval_seconds = [], 0, 0.0
    for cell in finished:
        results = cell_results(cell)
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


def dry_run_report(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path) -> str:
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
    lines.append(disk_line(cells, config))
    lines.append(f"estimated time: ~{format_duration(total)} ({rates.basis}; loading data and models not counted)")
    return "\n".join(lines + power_plan(cells, config))


def comparisons_in(cells: list[Cell]) -> int:
    """How many comparisons a sweep's cells make: two per pair (each task the other's partner), one per transfer
    from another encoder (start, target, size), counted once over the seeds."""
    pairs = {c.tasks for c in cells if c.kind == "pair"}
    starts = {(c.from_cell.parent.name if c.from_cell.name.startswith("seed-") else c.from_cell.name, c.tasks,
               c.max_train_examples) for c in cells if c.kind == "transfer" and c.from_cell is not None}
    return 2 * len(pairs) + len(starts)


def power_plan(cells: list[Cell], config: StudyConfig) -> list[str]:
    """--dry-run's detectable effects at the sweep's seeds (fixed --seeds, or --max-seeds' cap), from --sd."""
    from mtbio.reporting.rule_power import power_lines

    m = comparisons_in(cells)
    if not m:
        return []
    n = config.max_seeds or config.seeds or DEFAULT_SEEDS
    if config.sd is None:
        return [f"{m} comparisons at {n} seeds: give --sd (the per-seed sd of Δ, e.g. 0.01 for one point) to see the "
                "smallest effect each verdict can reach"]
    rule = config.rule_spec()[1]
    min_delta = rule.min_delta if rule.min_delta is not None else 0.01
    return power_lines(config.sd, n, m, min_delta, rule.alpha, config.effect)


# ---- --dry-run: the disk the sweep will hold ---------------------------------------------------------
CELL_FILES_BYTES = 24_000  # config, task definitions, run.log, metrics.jsonl, results.json, head configs
SUMMARY_BYTES = 300_000  # relation files and their two PNGs
SAVED_ENCODER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                       "vocab.txt", "merges.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def encoder_bytes(source: str | None) -> int | None:
    """Bytes a cell's saved encoder/ takes: the source's weights and tokenizer files (None if not on disk)."""
    from mtbio.model.encoder import resolve_encoder_name

    directory = Path(resolve_encoder_name(source))
    if not directory.is_dir():
        try:
            from huggingface_hub import snapshot_download

            directory = Path(snapshot_download(str(source), local_files_only=True))
        except Exception:  # not in the local cache: no estimate
            return None
    weights = [p for p in directory.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()]
    kept = [directory / name for name in SAVED_ENCODER_FILES if (directory / name).is_file()]
    return sum(p.stat().st_size for p in weights + kept)


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def disk_line(cells: list[Cell], config: StudyConfig) -> str:
    """What the finished sweep will hold: finished cells as they are, the others as estimated."""
    per_encoder = encoder_bytes(config.encoder)
    if per_encoder is None:
        return f"estimated disk: unknown (the encoder {config.encoder} is not on this machine)"
    finished = sum(directory_bytes(c.run_dir) for c in cells if c.done)
    pending = [c for c in cells if not c.done]
    keeps = 0 if config.keep_weights == "none" else per_encoder
    held = finished + len(pending) * (CELL_FILES_BYTES + keeps) + SUMMARY_BYTES
    # a running cell's best weights and its resume checkpoint (weights and optimizer state)
    launcher, options = config.launcher_spec()
    parallel = options.parallel if launcher == "local" else 1
    peak = 3 * per_encoder * min(local_layout(parallel, len(pending)).processes, len(pending))
    return (f"estimated disk: ~{format_bytes(held)} when finished with --keep-weights {config.keep_weights} "
            f"({format_bytes(per_encoder)} of encoder per cell that keeps weights)"
            + (f", up to ~{format_bytes(peak)} more while cells train" if peak else ""))


def format_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
