"""`mtbio select`: choose a target's training partners among candidates.

    <dir>/
        prediction-<predictor>/     the predictor's affinity.json over the target and the candidates
        pairwise/                   a pairwise sweep restricted to the target: its baseline and the top-K pairs
        groups/<target>+<a>+.../    the target trained with several partners (the selected ones, all the
                                    candidates): fine-tuned from a refine run on them (refined/), or with
                                    --group-training ratio one joint run, the target as main task
        select.json, select.md      the ranking, the verified pairs and the comparison of the three

The candidates are ranked by the predictor (its cost is printed); unless --no-verify, the top K are
trained as pairs with the target and those that improve it under the shared decision rule are the
selection (with --no-verify, the top K are); with --seeds auto / --max-seeds, an undecided pair gets one
more seed (with the target alone at that seed) round by round, as pairwise's edges do. The target is then
trained with the selection and with every candidate, and the three are compared on dev, and on test with
--eval-test (each cell scores test once, with its best-dev weights; the partners were chosen on dev). Every
training run takes the same number of optimizer steps (--matched-steps, the default; a refine-finetune group is
two such runs): a small target alone would otherwise take a tenth of a pair's steps, and a pair's gain would be
mostly more training (examples/select_biomedical.md). Every training run is a sweep cell
(`mtbio.experiments.sweep`): a rerun skips the finished ones, and a finished prediction is read back.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from mtbio.errors import MtbioError
from mtbio.experiments.affinity import predict_relations
from mtbio.experiments.common import catalog_for, decision_rule
from mtbio.experiments.launchers import drive_sweep, start_study
from mtbio.experiments.pairwise import pair_cell
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import Cell, baseline_cell, cell_score, cell_steps, seeds_of
from mtbio.reporting.affinity import AFFINITY, JOINT_PREDICTORS, affinity_compute
from mtbio.reporting.relations import undecided_cells
from mtbio.reporting.studies import study
from mtbio.reporting.selection import build_selection, ranking, verify_pairs, write_selection
from mtbio.run_dir import SweepDir
from mtbio.tasks.loading import TaskCatalog
from mtbio.tasks.schema import TaskDef
from mtbio.training.config import REFINE_LR


def select(config: StudyConfig, echo: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None]:
    """Rank, verify and compare (module docstring); returns the directory and select.json's content (None
    for a dry run, or while cells still run elsewhere)."""
    catalog = catalog_for(config)
    target, candidates = _target(config, catalog), _candidates(config, catalog)
    candidates = [c for c in candidates if c.name != target.name]
    if not candidates:
        raise MtbioError("select needs at least one candidate besides the target (--candidates a,b,... or a domain)")
    tasks = [target, *candidates]
    state, echo, data_dir = start_study(config, tasks, echo)
    directory = study("select").sweep_dir(config, target.name)
    affinity = _prediction(config, tasks, directory / f"prediction-{config.predictor_spec()[0]}", echo)
    ranked = ranking(affinity, target.name, [c.name for c in candidates])
    cost = affinity_compute(affinity)
    echo(f"{config.predictor_spec()[0]} ranking for {target.name} (cost {cost['wall_seconds']:.1f} s, "
         f"{cost['train_equivalent_examples']:,.0f} training-equivalent examples): "
         + ", ".join(f"{row['task']} {row['score']:+.3g}" for row in ranked))
    top = [row["task"] for row in ranked[:config.top]]

    lr = config.learning_rate(REFINE_LR)
    seeds = seeds_of(config)
    pairwise_dir = directory / "pairwise"
    if config.matched_steps and config.max_steps is None:
        config = config.model_copy(update={"max_steps": _pair_steps(config, catalog, data_dir, target.name, top)})
        echo(f"every training run takes {config.max_steps} optimizer steps (the longest top pair's, under the recipe)")
    alone = [baseline_cell(pairwise_dir, target.name, s, lr) for s in seeds]
    pairs = {c: [pair_cell(pairwise_dir, (target.name, c), s, lr) for s in seeds] for c in top} if config.verify else {}
    cells = alone + [cell for group in pairs.values() for cell in group]
    verified, selected = None, top
    while True:  # with --max-seeds: one more seed for each undecided pair (and the target alone), round by round
        if drive_sweep(cells, config, catalog.tasks, data_dir, state, pairwise_dir, lambda _: {}, lambda *_: [],
                       echo) is None:
            return directory, None
        if not config.verify:
            break
        verified, selected = verify_pairs(_scores(cells, target, kind="baseline"),
                                          {c: _scores(group, target) for c, group in pairs.items()},
                                          target.metric, decision_rule(config))
        edges = [{"source": c, "target": target.name, **pair} for c, pair in verified["pairs"].items()]
        more = undecided_cells({"edges": edges}, config.max_seeds) if config.max_seeds else []
        if not more:
            break
        grown = []
        for kind, names, seed in more:  # pairwise's rule: the target alone and each undecided pair at the next seed
            if kind == "baseline":
                if not any(cell.kind == "baseline" and cell.seed == seed for cell in cells):
                    cells.append(baseline_cell(pairwise_dir, target.name, seed, lr))
                continue
            grown.append(next(name for name in names if name != target.name))
            pairs[grown[-1]].append(pair_cell(pairwise_dir, (target.name, grown[-1]), seed, lr))
            cells.append(pairs[grown[-1]][-1])
        echo(f"adaptive seeds: one more seed for the undecided pair(s) {', '.join(grown)}")
    everyone = [c.name for c in candidates]
    sets = {"selected": selected, "all": everyone}
    runs_of = {name: [group_cells(directory / "groups", target.name, members, s, lr, config.group_training)
                      for s in seeds] for name, members in sets.items() if members}
    groups = {name: [chain[-1] for chain in chains] for name, chains in runs_of.items()}  # the scored runs
    unique = list(dict.fromkeys(cell for chains in runs_of.values() for chain in chains for cell in chain))
    mixer, options = config.mixer_spec()
    ratio = {**(options if mixer == "ratio" else {}), "name": "ratio", "main_task": target.name}
    grouped = config.model_copy(update={"mixer": ratio}) if config.group_training == "ratio" else config
    if unique and drive_sweep(unique, grouped, catalog.tasks, data_dir, state, directory / "groups", lambda _: {},
                              lambda *_: [], echo) is None:
        return directory, None
    outcomes = {}
    for split in ("dev", "test") if config.eval_test else ("dev",):
        runs = {"alone": _scores(alone, target, split),
                **{name: _scores(groups[name] if name in groups else alone, target, split) for name in sets}}
        outcomes[split] = build_selection(target.name, target.metric, runs, decision_rule(config))
    result = {"kind": "select", "target": target.name, "candidates": everyone, "predictor": config.predictor_spec()[0],
              "prediction_dir": f"prediction-{config.predictor_spec()[0]}", "prediction_cost": cost, "ranking": ranked,
              "top": config.top, "verify": config.verify, "pairs": verified["pairs"] if verified else None,
              "pairs_family": verified["family"] if verified else None, "correction": config.rule_spec()[1].correction,
              "selected": selected, "max_steps": config.max_steps, "seeds": seeds,
              "outcome_split": "test" if config.eval_test else "dev",
              "outcome": outcomes["test" if config.eval_test else "dev"], "outcome_dev": outcomes["dev"]}
    if state.is_main_process:
        write_selection(directory, result)
        echo(f"written: {directory / 'select.json'} and select.md")
    return directory, result


def group_cells(groups_dir: Path, target: str, partners: list[str], seed: int, lr: float,
                training: str = "refine-finetune") -> list[Cell]:
    """The runs that train the target with `partners` (named by its members; a long name by their hash), the
    scored one last: one ratio-mixer run, or (refine-finetune) a refine run on all of them, in <label>/refined/,
    then the target fine-tuned from its encoder."""
    label = "+".join([target, *partners])
    if len(label) > 80:
        label = f"{target}+{len(partners)}tasks-" + hashlib.sha1(label.encode()).hexdigest()[:8]
    if training == "ratio":
        return [Cell("group", (target, *partners), seed, groups_dir / label / f"seed-{seed}", "refine", lr)]
    refined = Cell("refined", (target, *partners), seed, groups_dir / label / "refined" / f"seed-{seed}", "refine", lr)
    return [refined, Cell("transfer", (target,), seed, groups_dir / label / f"seed-{seed}", "finetune", lr,
                          from_cell=refined.run_dir)]


def _pair_steps(config: StudyConfig, catalog: TaskCatalog, data_dir: Path | None, target: str,
                partners: list[str]) -> int:
    """The optimizer steps of the longest pair of `target` with one of `partners`, each under the recipe."""
    from mtbio.data.loading import split_sizes

    assert data_dir is not None
    sizes = {name: split_sizes(catalog.get(name), data_dir) for name in (target, *partners)}
    return max(cell_steps(pair_cell(Path("."), (target, p), config.seed, 0.0), config, sizes) for p in partners)


def _scores(cells: list[Cell], target: TaskDef, split: str = "dev", kind: str | None = None) -> dict[int, float]:
    """The target's score on `split` in each finished cell (of `kind`, when given), by seed."""
    found = {cell.seed: cell_score(cell, target, split) for cell in cells if cell.done and kind in (None, cell.kind)}
    return {seed: score for seed, score in found.items() if score is not None}


def _target(config: StudyConfig, catalog: TaskCatalog) -> TaskDef:
    named = catalog.resolve(config.target) if config.target else []
    if len(named) != 1:
        raise MtbioError("select needs one target task: --target T")
    return named[0]


def _candidates(config: StudyConfig, catalog: TaskCatalog) -> list[TaskDef]:
    """--candidates a,b,... (names or aliases) or one domain name."""
    if len(config.candidates) == 1 and config.candidates[0] in catalog.domains:
        return catalog.resolve([], config.candidates[0])
    if not config.candidates:
        raise MtbioError("select needs candidates: --candidates a,b,... or --candidates DOMAIN")
    return catalog.resolve(config.candidates)


def _prediction(config: StudyConfig, tasks: list[TaskDef], directory: Path,
                echo: Callable[[str], None]) -> dict[str, Any]:
    """The predictor's affinity.json over `tasks`, read back when a finished one is there."""
    path = SweepDir(directory).summary_file(AFFINITY)
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("tasks") == [t.name for t in tasks] and saved.get("default_predictor") == config.predictor_spec()[0]:
            echo(f"prediction read back from {path}")
            return saved
    if config.dry_run and config.predictor_spec()[0] in JOINT_PREDICTORS:
        raise MtbioError(f"--dry-run: the {config.predictor_spec()[0]} ranking needs its joint runs; run select without "
                         "--dry-run, or choose a --predictor without a joint run")
    return predict_relations(config, tasks, directory, echo)
