"""`mtbio transfer`: does a refined encoder help tasks it never saw? (issue 36; MT-DNN's domain-adaptation
experiment.)

Each refinement set (`--refine-on`, repeatable) is refined once (seed `--seed`, the sweep's
`--max-train-examples` per task). Each target (`--targets`) is fine-tuned at each training size
(`--sizes`, a fixed subset; a smaller one lies inside a larger) from the plain encoder and from every
refined encoder whose set does not hold it, `--seeds` seeds each, at one learning rate, so the
starting encoder is the only difference. The cells run on the sweep engine (locks, launchers,
resume). Beside the fine-tuned scores: the trivial score and the no-training baselines of each
starting encoder (the cosine of separately encoded pairs, a linear probe on frozen embeddings), fitted
on the same training subset and cached in `no_training.json`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from mtbio.data.loading import read_split, split_sizes
from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, data_dir_for, refuse_adaptive_seeds
from mtbio.experiments.launchers import drive_sweep, silent
from mtbio.experiments.sweep import Cell, baseline_trivial, cell_score, check_data, processes, seeds_of
from mtbio.fileio import write_json
from mtbio.model.encoder import load_encoder, load_tokenizer, resolve_encoder_name
from mtbio.model.probes import no_training_scores
from mtbio.reporting.transfer import PLAIN, build_transfer, write_transfer
from mtbio.run_dir import RunDir
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR, RunConfig

DEFAULT_SIZES = ("50", "200", "1000", "all")
NO_TRAINING_FILE = "no_training.json"


def transfer_plan(config: RunConfig) -> tuple[dict[str, list[TaskDef]], list[TaskDef]]:
    """The refinement sets (name → tasks) and the targets."""
    catalog = catalog_for(config)
    if not config.refine_on or not config.transfer_targets:
        raise MtbioError("name the tasks: --refine-on a,b (repeatable, one refined encoder per set) --targets x,y")
    sets = {}
    for given in config.refine_on:
        tasks = catalog.resolve([name for name in given.split(",") if name.strip()])
        sets["+".join(t.name for t in tasks)] = tasks
    targets = catalog.resolve(config.transfer_targets)
    orphans = [t.name for t in targets if all(t.name in {x.name for x in s} for s in sets.values())]
    if orphans:
        raise MtbioError(f"target(s) {', '.join(orphans)} are in every refinement set: no refined encoder has "
                         "not seen them; add a set without them")
    return sets, targets


def size_of(label: str, available: int) -> int:
    """A size label ("200", "all") → the examples a target trains on (at most what it has)."""
    if label == "all":
        return available
    if not label.isdigit() or int(label) < 1:
        raise MtbioError(f"--sizes: {label!r} is neither a positive number of examples nor all")
    return min(int(label), available)


def transfer_cells(sweep_dir: Path, sets: dict[str, list[TaskDef]], targets: list[TaskDef],
                   sizes: dict[str, dict[str, int]], config: RunConfig) -> list[Cell]:
    """The refine cells first, then per target, size and seed: from the plain encoder, then from each set."""
    lr = config.learning_rate(REFINE_LR)
    refined = {name: Cell("refined", tuple(t.name for t in tasks), config.seed,
                          sweep_dir / "refined" / name / f"seed-{config.seed}", "refine", lr)
               for name, tasks in sets.items()}
    cells = list(refined.values())
    for target in targets:
        for label, examples in sizes[target.name].items():
            folder = sweep_dir / "targets" / target.name / f"n-{label}"
            for seed in seeds_of(config):
                cells.append(Cell("baseline", (target.name,), seed, folder / PLAIN / f"seed-{seed}", "single-task", lr,
                                  max_train_examples=examples))
                cells += [Cell("transfer", (target.name,), seed, folder / f"from-{name}" / f"seed-{seed}", "finetune",
                               lr, from_cell=cell.run_dir, max_train_examples=examples)
                          for name, cell in refined.items() if target.name not in cell.tasks]
    return cells


def collect_transfer(cells: list[Cell], sets: dict[str, list[TaskDef]], targets: list[TaskDef],
                     sizes: dict[str, dict[str, int]], config: RunConfig,
                     no_training: dict[str, Any]) -> dict[str, Any]:
    """transfer.json's content from the finished cells (and the measured no-training baselines)."""
    by_name = {t.name: t for t in targets}
    plain: dict[tuple[str, str], dict[int, float]] = {}
    refined: dict[tuple[str, str, str], dict[int, float]] = {}
    trivial: dict[str, float] = {}
    for cell in cells:
        if cell.kind not in ("baseline", "transfer"):
            continue
        target, label = cell.tasks[0], cell.run_dir.parent.parent.name[len("n-"):]
        score = cell_score(cell, by_name[target])
        if score is None:
            continue
        if cell.kind == "baseline":
            plain.setdefault((target, label), {})[cell.seed] = score
            trivial.update(baseline_trivial([cell]))
        else:
            start = cell.run_dir.parent.name[len("from-"):]
            refined.setdefault((start, target, label), {})[cell.seed] = score
    return build_transfer({t.name: t.metric for t in targets}, {n: [t.name for t in s] for n, s in sets.items()},
                          sizes, plain, refined, config.alpha, config.min_delta, config.correction, trivial, no_training)


def measure_no_training(sweep_dir: Path, cells: list[Cell], targets: list[TaskDef], sizes: dict[str, dict[str, int]],
                        config: RunConfig, data_dir: Path, echo: Callable[[str], None]) -> dict[str, Any]:
    """{target: {start: {examples: {baseline: score}}}} for the plain encoder and every finished refined one,
    measured where `no_training.json` lacks them (then saved there)."""
    path = sweep_dir / NO_TRAINING_FILE
    found: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    starts = {PLAIN: resolve_encoder_name(config.encoder)}
    starts.update({c.run_dir.parent.name: str(RunDir(c.run_dir).encoder_dir) for c in cells
                   if c.kind == "refined" and c.done and any(RunDir(c.run_dir).encoder_dir.glob("*.safetensors"))})
    changed = False
    for start, source in starts.items():
        loaded = None
        for target in targets:
            if start != PLAIN and target.name in start.split("+"):
                continue
            dev = read_split(target, "dev", data_dir, config.max_eval_examples)
            for examples in sorted(set(sizes[target.name].values())):
                have = found.setdefault(target.name, {}).setdefault(start, {})
                if str(examples) in have:
                    continue
                if loaded is None:
                    echo(f"no-training baselines of the {start} encoder")
                    loaded = load_encoder(source), load_tokenizer(source)
                train = read_split(target, "train", data_dir, examples)
                scores = no_training_scores(target, loaded[0], loaded[1], train, dev, config.max_length)
                have[str(examples)] = {name: values[target.metric] for name, values in scores.items()}
                changed = True
    if changed:
        write_json(path, found)
    return found


def transfer(config: RunConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Run (or resume) the transfer sweep; write transfer.json and transfer.png (dry run: the plan)."""
    refuse_adaptive_seeds(config, "transfer")
    if config.adapter != "none":
        raise MtbioError(f"transfer --adapter {config.adapter}: a LoRA refine run leaves the base encoder unchanged; "
                         "run the transfer study with full training")
    sets, targets = transfer_plan(config)
    state = processes(config)
    echo = echo if state.is_main_process else silent
    data_dir = data_dir_for(config)
    involved = list({t.name: t for tasks in [*sets.values(), targets] for t in tasks}.values())
    check_data(involved, data_dir)
    assert data_dir is not None
    labels = list(config.sizes or DEFAULT_SIZES)
    sizes = {t.name: {label: size_of(label, split_sizes(t, data_dir).get("train", 0)) for label in labels}
             for t in targets}
    sweep_dir = Path(config.output) if config.output else Path("runs") / "transfer" / "+".join(t.name for t in targets)
    cells = transfer_cells(sweep_dir, sets, targets, sizes, config)

    def collect(done: list[Cell]) -> dict[str, Any]:
        measured = measure_no_training(sweep_dir, done, targets, sizes, config, data_dir, echo) \
            if state.is_main_process else {}
        return collect_transfer(done, sets, targets, sizes, config, measured)

    result = drive_sweep(cells, config, catalog_for(config).tasks, data_dir, state, sweep_dir, collect,
                         write_transfer, echo)
    return sweep_dir, result
