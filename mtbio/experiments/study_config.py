"""The configuration of a study (pairwise, stilt, transfer, affinity, select): the run options its cells train with
(`RunConfig`) and the study's own, each in a group the CLI gives the commands that take it: the decision rule and
adaptive seeds, where the cells run (sweep), STILT's intermediates and targets, transfer's sizes, the transfer
predictor (affinity), pruning (prune) and partner selection (select). A cell's run gets the run options alone
(`run_options_of`): its config.yaml holds what it trained with."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationInfo, field_validator

from mtbio.experiments.launcher_options import LAUNCHERS, launcher_options
from mtbio.experiments.predictor_options import PREDICTOR_OPTIONS, predictor_options
from mtbio.reporting.verdicts import RULES, RuleOptions, rule_options
from mtbio.training.config import (AUTO_MAX_SEEDS, AUTO_SEEDS, OPTIONS_OF, RUN_SHORTHANDS, RunConfig, Section,
                                   _component, _name_and_values, option, section, section_shorthands, shorthand)

# a component field of a study → (what its messages call it, its registry, its options model by name)
_COMPONENTS = {"rule": ("decision rule", RULES, rule_options),
               "predictor": ("transfer predictor", PREDICTOR_OPTIONS, predictor_options),
               "launcher": ("launcher", LAUNCHERS, launcher_options)}


class Pruning(Section):
    """Which partners a pairwise study trains: each target's most promising by an affinity run."""

    prune: int | None = option(None, "Train only each target's K most promising partners by the affinity run of "
                               "--affinity (and every baseline).", group="prune", shown="off", ge=1)
    affinity: str | None = option(None, "An `mtbio affinity` directory (affinity.json) whose scores --prune ranks "
                                  "partners by.", group="prune")
    prune_by: str | None = option(None, "The predictor of --affinity's affinity.json that --prune ranks by.",
                                  group="prune", shown="the file's default predictor")


class Selection(Section):
    """How `mtbio select` verifies the candidates and trains the target with its partners."""

    candidates: list[str] = option([], "select: the candidate partners, task names or aliases, or one domain.",
                                   group="select", comma=True)
    top: int = option(3, "select: how many of the best-ranked candidates to verify as pairs with the target.",
                      group="select", ge=1)
    verify: bool = option(True, "select: train the top candidates as pairs with the target and keep the helpful "
                          "ones (off: keep the top candidates unverified).", group="select",
                          flag="--verify/--no-verify")
    group_training: Literal["refine-finetune", "ratio"] = option(
        "refine-finetune", "select: how the target is trained with its partners: refine on them, then fine-tune the "
        "target from the refined encoder (the default by a higher dev mean on one target, +2.85 [-0.92, +6.63] F1 over "
        "the ratio mixer, undecided, at twice the steps: examples/select_biomedical.md), or one joint run with the "
        "ratio mixer, the target as main task.", group="select")
    matched_steps: bool = option(True, "select: every training run (the target alone, each pair, each group's runs) "
                                 "takes as many optimizer steps as the longest verified pair would under the recipe, "
                                 "so that a partner's effect is not more training (--max-steps N: every run N; off: "
                                 "each its recipe epochs).",
                                 group="select", flag="--matched-steps/--no-matched-steps")


class StudyConfig(RunConfig):
    """A study's options: the run options of `RunConfig` and the study's own."""

    dry_run: bool = option(False, "Print the runs still to do, their estimated time and the disk the sweep will "
                           "hold.", group="sweep")
    rule: str | dict[str, Any] = option(
        "v2", "Decision rule, a version registered in mtbio.reporting.verdicts: v2 reads improves/hurts/no effect/"
        "undecided from the t interval against ±min-delta, its level split over adaptive looks and the family; v3 also "
        "reads it against 0 (higher/lower with the size settled or not, within the threshold, no effect beyond it); "
        "v1 is the rule before (p < alpha and |mean| ≥ min-delta), kept for comparison. Or a YAML mapping of the "
        "version and its options, {name: v2, alpha: 0.05, min_delta: 0.01, spending: pocock, correction: bh}; "
        "--alpha, --min-delta, --spending and --correction are shorthands for them.", group="sweep")
    sd: float | None = option(None, "--dry-run: the per-seed sd of Δ (metric units, e.g. 0.01 for one point) to "
                              "state the smallest effect each verdict can reach at --seeds.", group="sweep", gt=0)
    effect: float | None = option(None, "--dry-run with --sd: the true Δ whose seeds needed are stated (default: "
                                  "twice the threshold).", group="sweep", gt=0)
    primary: str | None = option(None, "One comparison declared primary (as the report names it, e.g. "
                                 "ddi->bc5cdr-chem), judged alone at --alpha; the others form the secondary family.",
                                 group="sweep")
    max_seeds: int | None = option(None, "Adaptive seeds: start at --seeds (3) and add a seed to the cells of "
                                   "undecided edges (select: of its undecided pairs), round by round, up to N "
                                   "seeds.", group="sweep", ge=2)
    launcher: str | dict[str, Any] = option(
        "local", "Where the sweep's cells run: local (this machine, --parallel at a time), ray (one Ray task per "
        "cell) or slurm (one SLURM job per cell, through submitit; returns after submitting); or a YAML mapping of the "
        "launcher and its options, {name: slurm, partition: gpu, time: 90, account: lab, config: slurm.yaml, cpus: 8, "
        "gpus: 1} ({name: ray, address: ..., cpus: ..., gpus: ...}); the flags below are shorthands for them.",
        group="sweep")
    retries: int = option(1, "Attempts after a cell's first failure (each failure is recorded beside the cell).",
                          group="sweep", ge=0)
    keep_weights: Literal["best", "none"] = option(
        "none", "What a finished cell keeps: best (its best-dev encoder and heads) or none (scores, metrics and logs "
        "only). STILT intermediates keep their weights until their targets finish.", group="sweep")
    intermediate: list[str] = option([], "Intermediate tasks.", group="stilt", comma=True, shown="--tasks/--domain")
    target: list[str] = option([], "Target tasks (select: the one target).", group="stilt", comma=True,
                               shown="--tasks/--domain")
    refine_on: list[str] = option([], "transfer: a refinement set, comma-separated task names or aliases; repeat "
                                  "for more sets (one refined encoder each). A target is fine-tuned from every set "
                                  "that does not hold it.", group="transfer")
    transfer_targets: list[str] = option([], "transfer: the target tasks, each fine-tuned from the plain and the "
                                         "refined encoders.", group="transfer", comma=True, flag="--targets")
    sizes: list[str] = option([], "transfer: the targets' training sizes, numbers of examples or all "
                              "(a fixed subset; a smaller one lies inside a larger).", group="transfer", comma=True,
                              shown="50,200,1000,all")
    predictor: str | dict[str, Any] = option(
        "cosine", "The transfer predictor, a registered name (`mtbio components predictors` lists them; lookahead and "
        "cosine measure during one joint run, the others need none), or a YAML mapping of the name and its options, "
        "{name: fisher, examples: 24, head_steps: 30} ({name: cosine, every: 100, batch_size: 32, split: train}); the "
        "flags below are shorthands for them.", group="affinity")
    pruning: Pruning = section(Pruning, "Which partners a pairwise study trains (--prune, --affinity, --prune-by).")
    selection: Selection = section(Selection, "How select verifies its candidates and trains the target with them.")


    @field_validator("rule", "predictor", "launcher")
    @classmethod
    def _registered_component(cls, spec: str | dict[str, Any], info: ValidationInfo) -> str | dict[str, Any]:
        what, registry, options_of = _COMPONENTS[info.field_name]
        return _component(spec, what, registry, options_of)

    def _spec(self, field: str) -> tuple[str, Any]:
        """A component field's name and its options model."""
        what, _, options_of = _COMPONENTS[field]
        name, values = _name_and_values(getattr(self, field), what)
        return name, options_of(name, values)

    def rule_spec(self) -> tuple[str, RuleOptions]:
        """The decision rule's version and its options."""
        return self._spec("rule")

    def predictor_spec(self) -> tuple[str, Any]:
        """The transfer predictor's name and its options model."""
        return self._spec("predictor")

    def launcher_spec(self) -> tuple[str, Any]:
        """The launcher's name and its options model."""
        return self._spec("launcher")

    def adaptive_seeds(self) -> None:
        """--seeds auto: the adaptive design, written out as --seeds 3 --max-seeds N (8 unless given)."""
        self.seeds = AUTO_SEEDS
        self.max_seeds = self.max_seeds or AUTO_MAX_SEEDS


def _rule_model(name: str) -> type[RuleOptions] | None:
    return RULES.get(name).options if name in RULES else None


OPTIONS_OF["rule"] = _rule_model
OPTIONS_OF["launcher"] = lambda name: LAUNCHERS.get(name) if name in LAUNCHERS else None
OPTIONS_OF["predictor"] = lambda name: PREDICTOR_OPTIONS.get(name) if name in PREDICTOR_OPTIONS else None
StudyConfig.shorthands = {
    **RUN_SHORTHANDS,
    "alpha": shorthand("rule", "alpha", float, 0.05, "Family-wise significance level of the decision rule.",
                       group="sweep", gt=0, lt=1),
    "min_delta": shorthand("rule", "min_delta", float, None, "Smallest |mean Δ| that counts as an effect, in the "
                           "metric's own units (default: each metric's registered threshold, one point of a 0–1 "
                           "score).", group="sweep", ge=0),
    "spending": shorthand("rule", "spending", Literal["obrien-fleming", "pocock"], "obrien-fleming",
                          "v2 with adaptive seeds: the alpha-spending function that shares the level over the looks.",
                          group="sweep"),
    "correction": shorthand("rule", "correction", Literal["holm", "bh", "none"], "holm",
                            "Multiplicity control across one graph's tests: holm (family-wise), bh "
                            "(Benjamini–Hochberg) or none.", group="sweep"),
    "parallel": shorthand("launcher", "parallel", int | Literal["auto"], 1, "local: cells at once, one process each, "
                          "taking the GPUs in turn where there are GPUs, else sharing the cores' threads. auto: a "
                          "process per GPU, else a single-thread process per core (the fastest layout measured), at "
                          "most one per cell left.", group="sweep"),
    "cell_cpus": shorthand("launcher", "cpus", int, 1, "ray/slurm: CPU cores per cell.", group="sweep", ge=1),
    "cell_gpus": shorthand("launcher", "gpus", int, 0, "ray/slurm: GPUs per cell.", group="sweep", ge=0),
    "ray_address": shorthand("launcher", "address", str, None, "ray: address of a running Ray cluster.",
                             group="sweep", shown="a local Ray instance"),
    "slurm_config": shorthand("launcher", "config", str, None, "slurm: YAML file of submitit executor parameters "
                              "(slurm_partition, timeout_min, slurm_account, slurm_additional_parameters, ...; "
                              "cluster: local runs the jobs on this machine). The flags below win.", group="sweep"),
    "slurm_partition": shorthand("launcher", "partition", str, None, "slurm: partition.", group="sweep"),
    "slurm_time": shorthand("launcher", "time", int, None, "slurm: time limit per cell in minutes.", group="sweep",
                            shown="60", ge=1),
    "slurm_account": shorthand("launcher", "account", str, None, "slurm: account to charge.", group="sweep"),
    "predictor_examples": shorthand("predictor", "examples", int, 64, "text_similarity and fisher: the training "
                                    "examples per task they read (a deterministic sample).", group="affinity", ge=1),
    "fisher_steps": shorthand("predictor", "head_steps", int, 50, "fisher: optimizer steps of each task's new head, "
                              "the encoder frozen, before the squared gradients are taken.", group="affinity", ge=1),
    "affinity_every": shorthand("predictor", "every", int, 100, "Measure the task affinities every N optimizer steps "
                                "(and at the last step if no measurement fell into the run).", group="affinity", ge=1),
    "affinity_batch_size": shorthand("predictor", "batch_size", int, 32, "Examples per task in each measurement batch "
                                     "(seeded draws from the train split, apart from the training batches).",
                                     group="affinity", ge=1),
    "affinity_split": shorthand("predictor", "split", Literal["train", "dev"], "train", "Where the lookahead measures "
                                "the target's loss: a train batch (TAG) or a dev batch (held-out).", group="affinity"),
    **section_shorthands(StudyConfig),
}


def run_options_of(config: RunConfig, **update: Any) -> RunConfig:
    """The run options of a study's config (or a run's), with `update` applied: what one of its cells trains with."""
    values = {name: getattr(config, name) for name in RunConfig.model_fields}
    return RunConfig.model_validate({**values, **update})
