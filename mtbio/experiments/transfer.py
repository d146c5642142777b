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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mtbio.data.loading import read_split, split_sizes
from mtbio.errors import MtbioError
from mtbio.experiments.common import catalog_for, decision_rule, refuse_adaptive_seeds
from mtbio.experiments.launchers import drive_sweep, start_study
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import Cell, baseline_trivial, cell_score, seeds_of
from mtbio.fileio import write_json
from mtbio.model.encoder import load_encoder, load_tokenizer, resolve_encoder_name
from mtbio.model.probes import no_training_scores
from mtbio.reporting.transfer import PLAIN, build_transfer, write_transfer
from mtbio.reporting.studies import study
from mtbio.run_dir import RunDir
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR

DEFAULT_SIZES = ("50", "200", "1000", "all")
NO_TRAINING_FILE = "no_training.json"


@dataclass(frozen=True)
class Refinement:
    """A refined starting encoder: `tasks` refined together, by a cell of this sweep (`run` None) or by a
    refine run given as `--refine-on DIR` (a variant refined with other options: `--l2sp`, a lower learning
    rate, adapters merged), finished or under way (its cells wait for it)."""

    name: str
    tasks: tuple[str, ...]
    run: Path | None = None


def transfer_plan(config: StudyConfig) -> tuple[list[Refinement], list[TaskDef]]:
    """The refinement sets and the targets."""
    catalog = catalog_for(config)
    if not config.refine_on or not config.transfer_targets:
        raise MtbioError("name the tasks: --refine-on a,b (repeatable, one refined encoder per set; or a finished "
                         "refine run's directory) --targets x,y")
    sets = []
    for given in config.refine_on:
        if Path(given).is_dir():
            run = RunDir(given)
            if run.finished and any(run.encoder_dir.glob("*.safetensors")):
                seen = run.config().get("tasks") or run.results().get("tasks") or []  # a merged run has no config.yaml
            elif run.config_file.is_file() and run.config().get("tasks"):
                seen = run.config()["tasks"]  # a refine under way: the cells from it wait until it finishes
            else:
                raise MtbioError(f"--refine-on {given}: neither a finished run with its encoder's weights nor a "
                                 "refine under way (no config.yaml naming its tasks)")
            sets.append(Refinement(Path(given).name, tuple(seen), Path(given)))
        else:
            tasks = catalog.resolve([name for name in given.split(",") if name.strip()])
            sets.append(Refinement("+".join(t.name for t in tasks), tuple(t.name for t in tasks)))
    names = [r.name for r in sets]
    if len(set(names)) != len(names) or PLAIN in names:
        raise MtbioError(f"--refine-on: each refinement set needs its own name, other than {PLAIN} "
                         f"({', '.join(names)})")
    targets = catalog.resolve(config.transfer_targets)
    orphans = [t.name for t in targets if all(t.name in r.tasks for r in sets)]
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


def target_sizes(labels: list[str], available: int) -> dict[str, int]:
    """The distinct training sizes of one target: a size at or above what it has is its "all", counted once."""
    sizes: dict[str, int] = {}
    for label in labels:
        examples = size_of(label, available)
        sizes.setdefault("all" if examples == available else label, examples)
    return sizes


def transfer_cells(sweep_dir: Path, sets: list[Refinement], targets: list[TaskDef],
                   sizes: dict[str, dict[str, int]], config: StudyConfig) -> list[Cell]:
    """The refine cells first, then per target, size and seed: from the plain encoder, then from each set."""
    lr = config.learning_rate(REFINE_LR)
    refined = [Cell("refined", r.tasks, config.seed, sweep_dir / "refined" / r.name / f"seed-{config.seed}",
                    "refine", lr) for r in sets if r.run is None]
    starts = {r.name: r.run or sweep_dir / "refined" / r.name / f"seed-{config.seed}" for r in sets}
    cells = list(refined)
    for target in targets:
        for label, examples in sizes[target.name].items():
            folder = sweep_dir / "targets" / target.name / f"n-{label}"
            for seed in seeds_of(config):
                cells.append(Cell("baseline", (target.name,), seed, folder / PLAIN / f"seed-{seed}", "single-task", lr,
                                  max_train_examples=examples))
                cells += [Cell("transfer", (target.name,), seed, folder / f"from-{r.name}" / f"seed-{seed}", "finetune",
                               lr, from_cell=starts[r.name], max_train_examples=examples)
                          for r in sets if target.name not in r.tasks]
    return cells


def collect_transfer(cells: list[Cell], sets: list[Refinement], targets: list[TaskDef],
                     sizes: dict[str, dict[str, int]], config: StudyConfig,
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
    return build_transfer({t.name: t.metric for t in targets}, {r.name: list(r.tasks) for r in sets},
                          sizes, plain, refined, decision_rule(config), trivial, no_training)


def measure_no_training(sweep_dir: Path, sets: list[Refinement], targets: list[TaskDef],
                        sizes: dict[str, dict[str, int]], config: StudyConfig, data_dir: Path,
                        echo: Callable[[str], None]) -> dict[str, Any]:
    """{target: {start: {examples: {baseline: score}}}} for the plain encoder and every refined one with weights,
    measured where `no_training.json` lacks them (then saved there)."""
    path = sweep_dir / NO_TRAINING_FILE
    found: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    starts = {PLAIN: (resolve_encoder_name(config.encoder), ())}
    for r in sets:
        encoder = RunDir(r.run or sweep_dir / "refined" / r.name / f"seed-{config.seed}").encoder_dir
        if any(encoder.glob("*.safetensors")):
            starts[r.name] = (str(encoder), r.tasks)
    changed = False
    for start, (source, seen) in starts.items():
        loaded = None
        for target in targets:
            if target.name in seen:
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


def transfer(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Run (or resume) the transfer sweep; write transfer.json and transfer.png (dry run: the plan)."""
    refuse_adaptive_seeds(config, "transfer")
    adapter = config.adapter_spec()[0]
    if adapter != "none":
        raise MtbioError(f"transfer --adapter {adapter}: a LoRA refine run leaves the base encoder unchanged; "
                         "run the transfer study with full training")
    sets, targets = transfer_plan(config)
    catalog = catalog_for(config)
    refined_here = [catalog.get(name) for r in sets if r.run is None for name in r.tasks]
    state, echo, data_dir = start_study(config, list({t.name: t for t in [*refined_here, *targets]}.values()), echo)
    labels = list(config.sizes or DEFAULT_SIZES)
    sizes = {t.name: target_sizes(labels, split_sizes(t, data_dir).get("train", 0)) for t in targets}
    sweep_dir = study("transfer").sweep_dir(config, "+".join(t.name for t in targets))
    cells = transfer_cells(sweep_dir, sets, targets, sizes, config)

    def collect(done: list[Cell]) -> dict[str, Any]:
        measured = measure_no_training(sweep_dir, sets, targets, sizes, config, data_dir, echo) \
            if state.is_main_process else {}
        return collect_transfer(done, sets, targets, sizes, config, measured)

    result = drive_sweep(cells, config, catalog.tasks, data_dir, state, sweep_dir, collect,
                         write_transfer, echo)
    return sweep_dir, result
