"""Where a sweep's cells run (`--launcher`): this process, N local processes, Ray tasks or SLURM jobs.

Every launcher runs the same job function, `run_cell_job`, which claims its cell's lock, trains it
and writes it into the cell's run directory; the sweep directory stays the single source of truth,
so launchers of any kind can share it and a rerun of the command picks up where they stopped.
"""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any, Callable

from accelerate import Accelerator

from mtbio.errors import MtbioError
from mtbio.experiments.cell_locks import held_by_other
from mtbio.experiments.layout import Layout, local_layout
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.common import data_dir_for
from mtbio.experiments.sweep import (Cell, check_data, check_protocol, declare_metrics, dry_run_report, failed_cells,
                                     failure_message, processes, record_cells, record_protocol, unsettled,
                                     work_through, write_summary)
from mtbio.run_dir import pack_cells
from mtbio.tasks.schema import TaskDef
from mtbio.training.trainer import StopRequested, make_accelerator

DEFAULT_SLURM_MINUTES = 60


def drive_sweep(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
                state: Accelerator, sweep_dir: Path, collect: Callable[[list[Cell]], dict[str, Any]],
                write: Callable[[Path, dict[str, Any]], list[Path]], echo: Callable[[str], None] = print
                ) -> dict[str, Any] | None:
    """What every sweep (pairwise, stilt) does with its cells: the dry-run plan, or record the sweep, run
    its cells with the launcher, write the summary files from the finished cells (`collect`, then
    `write`) and report failed cells. Returns the summary, or None (dry run, or cells still running)."""
    check_protocol(sweep_dir, config)
    if config.dry_run:
        assert data_dir is not None
        echo(dry_run_report(cells, config, catalog, data_dir))
        return None
    state.wait_for_everyone()  # every process has read sweep.json before it is written
    if state.is_main_process:
        record_protocol(sweep_dir, config)
        declare_metrics(sweep_dir, {name: catalog[name].metric for cell in cells for name in cell.tasks})
        record_cells(sweep_dir, cells)
    if not launch(cells, config, catalog, data_dir, state, sweep_dir, echo):
        return None  # cells are still running elsewhere (SLURM jobs)
    summary = collect([c for c in cells if c.done])
    if state.is_main_process:  # the summary, and the finished cells in one file (cells.jsonl) beside it
        for path in write_summary(sweep_dir, lambda: [*write(sweep_dir, summary),
                                                      pack_cells(sweep_dir, [c.run_dir for c in cells])]):
            echo(f"written: {path}")
    failed = failed_cells(cells, config.retries)
    if failed:
        raise MtbioError(failure_message(failed) + "\nthe summary files were written from the finished cells")
    return summary


def silent(_line: str) -> None:
    """Progress lines come from the main process only."""


def start_study(config: StudyConfig, tasks: list[TaskDef], echo: Callable[[str], None]
                ) -> tuple[Accelerator, Callable[[str], None], Path]:
    """What every study does before its cells: its process group, what prints (the main process only), and its data
    directory, refused up front when a task it trains lacks files."""
    state = processes(config)
    data_dir = data_dir_for(config)
    check_data(tasks, data_dir)
    assert data_dir is not None
    return state, echo if state.is_main_process else silent, data_dir


def launch(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
           state: Accelerator, sweep_dir: Path, echo: Callable[[str], None] = print) -> bool:
    """Run the sweep's unfinished cells with `config.launcher`; True when no cell is left to train
    (False: SLURM jobs were submitted and run on their own)."""
    name, options = config.launcher_spec()
    explicit = name == "local" and options.parallel != "auto" and options.parallel > 1
    if (name != "local" or explicit) and state.num_processes > 1:
        raise MtbioError("under accelerate launch a sweep runs its cells one after another; leave out "
                         "--launcher and --parallel")
    if name != "local" and options.gpus > 1:
        raise MtbioError("a cell on several GPUs is not supported by the launchers yet; use --cell-gpus 1 (or run "
                         "the sweep under accelerate launch, one cell after another)")
    if name == "ray":
        run_on_ray(cells, config, catalog, data_dir, echo)
        return True
    if name == "slurm":
        submitted = submit_to_slurm(cells, config, catalog, data_dir, sweep_dir, echo)
        left = unsettled(cells, cells, config.retries)
        if left and not submitted:
            echo(f"{len(left)} cell(s) still running or queued; see: mtbio sweep status {sweep_dir}")
        return not submitted and not left
    layout = local_layout(options.parallel, len(unsettled(cells, cells, config.retries)))
    if state.num_processes == 1 and layout.processes > 1:
        run_local_processes(cells, config, catalog, data_dir, layout, echo)
        return True
    work_through(cells, config, catalog, data_dir, state, echo)
    return True


def run_cell_job(cell: Cell, cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef],
                 data_dir: Path | None, threads: int | None = None) -> str:
    """The job function of one cell (a Ray task, a SLURM job): claim, train, record; returns the cell's
    state afterwards (done | failed). Waits for an intermediate and for another owner of the cell."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    state = make_accelerator(config.mixed_precision)
    work_through([cell], config, catalog, data_dir, state, echo=lambda _: None, all_cells=cells)
    return "done" if cell.done else "failed"


# ---- local: N processes on this machine ---------------------------------------------------------
def _local_worker(slot: int, cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef],
                  data_dir: Path | None, threads: int, gpus: list[str]) -> None:
    """One of --parallel processes: its own GPU (or its share of the cores), then the claim loop."""
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    state = make_accelerator(config.mixed_precision)
    work_through(cells, config, catalog, data_dir, state, echo=lambda line: print(f"[worker {slot}] {line}",
                                                                                     flush=True))


def run_local_processes(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
                        layout: Layout, echo: Callable[[str], None]) -> None:
    """--parallel: the layout's processes, spawned, work through the cells (the locks split them)."""
    import multiprocessing

    echo(layout.describe())
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_local_worker, args=(slot, cells, config, catalog, data_dir, layout.threads,
                                                           list(layout.gpus)))
               for slot in range(layout.processes)]
    stopped: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        """SIGTERM/SIGINT to the launcher reaches its workers: each saves its cell's state and stops."""
        stopped.append(signum)
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for worker in workers:
            if not stopped:  # a signal while starting: the workers not yet started are not started
                worker.start()
        for worker in workers:
            if worker.pid is not None:
                worker.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopped:
        raise StopRequested(stopped[0])
    crashed = [w.exitcode for w in workers if w.exitcode]
    if crashed:
        raise MtbioError(f"{len(crashed)} of {layout.processes} worker processes stopped with an error "
                         f"(exit status {', '.join(map(str, crashed))}); run the same command again to finish")


# ---- ray: one task per cell ---------------------------------------------------------------------
def run_on_ray(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
               echo: Callable[[str], None]) -> None:
    """Each unfinished cell is a Ray task asking for --cell-cpus/--cell-gpus, on --ray-address or a
    Ray instance started here (or the one this process already started)."""
    try:
        import ray
    except ImportError:
        raise MtbioError("--launcher ray needs Ray: pip install 'mtbio[ray]'") from None
    _, options = config.launcher_spec()
    started_here = not ray.is_initialized()
    if started_here:
        local = {} if options.address else {"include_dashboard": False}  # options of a new instance only
        ray.init(address=options.address, log_to_driver=False, **local)
    try:
        task = ray.remote(num_cpus=options.cpus, num_gpus=options.gpus, max_retries=0)(_ray_cell)
        pending = unsettled(cells, cells, config.retries)
        refs = {task.remote(cell, cells, config, catalog, data_dir): cell for cell in pending}
        echo(f"{len(refs)} cells sent to Ray ({options.cpus} CPU, {options.gpus} GPU each)")
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            cell = refs[ready[0]]
            echo(f"{ray.get(ready[0])}: {cell.describe()} → {cell.run_dir}")
    finally:
        if started_here:
            ray.shutdown()


def _ray_cell(cell: Cell, cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef],
              data_dir: Path | None) -> str:
    import ray

    os.environ["MTBIO_JOB_ID"] = f"ray-{ray.get_runtime_context().get_task_id()}"
    return run_cell_job(cell, cells, config, catalog, data_dir, threads=config.launcher_spec()[1].cpus)


# ---- slurm: one job per cell, through submitit ----------------------------------------------------
def executor_parameters(config: StudyConfig) -> dict[str, Any]:
    """submitit's parameters: the --slurm-config file, then the flags (flags win)."""
    from mtbio.tasks.loading import read_yaml

    options = config.launcher_spec()[1]
    values: dict[str, Any] = {}
    if options.config:
        values = read_yaml(Path(options.config)) or {}
        if not isinstance(values, dict):
            raise MtbioError(f"{options.config}: a mapping of submitit parameters (slurm_partition: gpu, ...)")
    values.setdefault("timeout_min", DEFAULT_SLURM_MINUTES)
    values.setdefault("cpus_per_task", options.cpus)
    if options.gpus:
        values.setdefault("gpus_per_node", options.gpus)
    flags = {"slurm_partition": options.partition, "timeout_min": options.time, "slurm_account": options.account}
    values.update({k: v for k, v in flags.items() if v is not None})
    values.setdefault("name", "mtbio-cell")
    return values


def make_executor(config: StudyConfig, folder: Path) -> Any:
    """A submitit AutoExecutor for the cells (`cluster` from the YAML file, else SLURM)."""
    try:
        import submitit
    except ImportError:
        raise MtbioError("--launcher slurm needs submitit: pip install 'mtbio[slurm]'") from None
    parameters = executor_parameters(config)
    cluster = parameters.pop("cluster", None)
    if cluster is None:
        if shutil.which("sbatch") is None:
            raise MtbioError("--launcher slurm: no sbatch on this machine (put 'cluster: local' in --slurm-config "
                             "to run the jobs here)")
        cluster = "slurm"
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    try:
        executor.update_parameters(**parameters)
    except (ValueError, TypeError, NameError, AssertionError) as exc:  # submitit's checks of the names and types
        raise MtbioError(f"submitit parameters: {str(exc).splitlines()[0]}") from None
    return executor


def submit_to_slurm(cells: list[Cell], config: StudyConfig, catalog: dict[str, TaskDef], data_dir: Path | None,
                    sweep_dir: Path, echo: Callable[[str], None]) -> int:
    """Submit one job per unfinished cell that no live owner holds, as one array; returns how many."""
    todo = [c for c in unsettled(cells, cells, config.retries) if not held_by_other(c.run_dir)]
    if not todo:
        return 0
    executor = make_executor(config, sweep_dir / "slurm")
    with executor.batch():
        jobs = [executor.submit(run_cell_job, cell, cells, config, catalog, data_dir, config.launcher_spec()[1].cpus)
                for cell in todo]
    echo(f"submitted {len(jobs)} cell job(s) ({jobs[0].job_id}{' ...' if len(jobs) > 1 else ''}); "
         f"see their progress with: mtbio sweep status {sweep_dir}")
    return len(jobs)
