"""The resolved configuration of a run: every CLI flag is a field here, and a YAML config file
uses the same names (dashes or underscores). Unknown keys are errors. The resolved config is
saved as `config.yaml` in the run directory; nothing is ever inherited from an old checkpoint."""
from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from mtbio.errors import MtbioError
from mtbio.fileio import write_text

if TYPE_CHECKING:
    from typing_extensions import Self

REFINE_LR = 5e-5  # seed 004 section 4.2
FINETUNE_LR = 1e-5  # seed 004: fine-tuning a refined model uses a smaller learning rate
AUTO_SEEDS, AUTO_MAX_SEEDS = 3, 8  # --seeds auto: the first round's seeds, and --max-seeds unless given


def option(default: Any = None, help: str = "", *, group: str = "training", flag: str | None = None,
           comma: bool = False, envvar: str | None = None, shown: str | None = None, resumable: bool = False,
           per_cell: bool = False, choices: Callable[[], list[str]] | None = None, **constraints: Any) -> Any:
    """A `RunConfig` field and everything its command-line option needs (the CLI builds options from these).

    `group` says which commands take it (training: refine, finetune, pairwise, stilt, affinity; finetune;
    sweep: pairwise, stilt, transfer and select; seeds: finetune, the sweeps, affinity and select; stilt; affinity:
    affinity and select; prune: pairwise; select; transfer). `flag` overrides the flag name
    (default --field-name), `comma` reads a comma-separated list, `shown` is the default shown in
    --help when it is not the field's own default (a default decided by the command). `resumable`: a
    training option that `--resume` may change (run length, evaluation, logging, paths); every other
    training option must equal the checkpoint's (`fixed_on_resume`). `per_cell`: a training option that a
    sweep sets for each of its cells (tasks, seed, output, ...) or that does not change what a cell trains (the
    checkpoint and log cadence); every other training option is part of the sweep's protocol, the options all
    its cells share (`protocol_options`). `choices`: the values a string option takes, read when the flag is used (the
    names of a registry, which a plugin may extend).
    """
    extra = {"group": group, "flag": flag, "comma": comma, "envvar": envvar, "shown": shown, "resumable": resumable,
             "per_cell": per_cell, "choices": choices}
    if isinstance(default, list):
        return Field(default_factory=list, description=help, json_schema_extra=extra, **constraints)
    return Field(default, description=help, json_schema_extra=extra, **constraints)


def shorthand(component: str, key: str, kind: Any, default: Any = None, help: str = "", **settings: Any) -> FieldInfo:
    """A flag that sets one option of a component instead of a field of its own (`--temperature 3`: the mixer's
    `temperature: 3`), with `option`'s settings (group, shown, ...); also a flat key of a config file. `default` is the
    option's own default: a value equal to it leaves the component's mapping as it is."""
    info = option(default, help, **settings)
    info.annotation = kind if default is not None else kind | None
    info.json_schema_extra.update(component=component, key=key)  # type: ignore[union-attr]
    return info


OPTIONS_OF: dict[str, Callable[[str], type[BaseModel] | None]] = {}
"""Each component field that shorthands set → the options model of a component's name (None: not registered)."""


def fold_shorthands(values: dict[str, Any], shorthands: dict[str, FieldInfo],
                    fields: dict[str, FieldInfo]) -> dict[str, Any]:
    """`values` with each shorthand key (a flag's, or a flat key of a config file or an older config.yaml) moved
    into its component's mapping; ValueError when the named component has no such option."""
    values = dict(values)
    for flat, info in shorthands.items():
        if flat not in values:
            continue
        extra: dict[str, Any] = info.json_schema_extra  # type: ignore[assignment]
        component, key = extra["component"], extra["key"]
        if extra.get("section"):  # a section's option: given, it wins over a recipe's (its own check applies)
            values[component] = {**as_mapping(values.get(component)), key: values.pop(flat)}
            continue
        try:
            value = TypeAdapter(Annotated[info.annotation, info]).validate_python(values.pop(flat))
        except ValidationError as exc:
            raise ValueError(f"--{flat.replace('_', '-')}: {exc.errors()[0]['msg']}") from None
        if value == info.get_default(call_default_factory=True):
            continue
        name, options = _name_and_values(values.get(component, fields[component].default), component)
        model = OPTIONS_OF[component](name)
        if model is not None and key not in model.model_fields:
            raise ValueError(f"--{flat.replace('_', '-')} is not an option of --{component} {name}")
        options[key] = value
        if model is not None:  # written out whole, as the component's validator writes a mapping
            try:
                options = model.model_validate(options).model_dump(mode="json")
            except ValidationError:
                pass  # the component's own check names what does not fit
        values[component] = {"name": name, **options}
    return values


def as_mapping(value: Any) -> dict[str, Any]:
    """A section's options as a plain mapping (a section model, a mapping, or nothing given)."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    return dict(value or {})


@functools.cache
def sections_of(model: type[BaseModel]) -> dict[str, type[Section]]:
    """The section fields of a config model: field name → its section model."""
    return {name: field.annotation for name, field in model.model_fields.items()
            if isinstance(field.annotation, type) and issubclass(field.annotation, Section)}


@functools.cache
def section_of(model: type[BaseModel]) -> dict[str, str]:
    """Each section option of a config model → the field that holds it."""
    return {option: name for name, part in sections_of(model).items() for option in part.model_fields}


def section_shorthands(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """Every section option of a config model as a shorthand: its own flag and flat config key."""
    found = {}
    for name, part in sections_of(model).items():
        for key, field in part.model_fields.items():
            info = copy.copy(field)
            info.json_schema_extra = {**(field.json_schema_extra or {}), "component": name, "key": key,  # type: ignore[dict-item]
                                      "section": True}
            found[key] = info
    return found


def flat_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A config model's options by their flat names: its fields, each section's options in place of the section."""
    sections = sections_of(model)
    flat: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        flat.update(sections[name].model_fields if name in sections else {name: field})
    return flat


def flat_values(values: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """`values` (a config's dump, or a saved config after `upgrade_retired`) by flat option names: each section's
    mapping, its defaults filled in, in place of the section."""
    flat = {}
    sections = sections_of(model)
    for name, value in values.items():
        if name in sections:
            flat.update(sections[name].model_validate(as_mapping(value)).model_dump(mode="json"))
        else:
            flat[name] = value
    return flat


def flag_of(shorthands: dict[str, FieldInfo], component: str, key: str) -> str:
    """The flag that sets `component`'s option `key`, else the option's name."""
    flats = [flat for flat, info in shorthands.items()
             if (info.json_schema_extra or {}).get("component") == component and info.json_schema_extra["key"] == key]  # type: ignore[index]
    return f"--{flats[0].replace('_', '-')}" if flats else key


def _pooling_names() -> list[str]:
    from mtbio.model.poolings import POOLINGS  # the names only: no torch

    return POOLINGS.names()


def _registered(registry: Any, what: str, name: str) -> str:
    """`name` when `registry` holds it, else ValueError naming the registered ones."""
    if name not in registry:
        raise ValueError(f"unknown {what} '{name}' (registered: {', '.join(registry.names())})")
    return name


def _name_and_values(spec: str | dict[str, Any], what: str) -> tuple[str, dict[str, Any]]:
    """A component given by name or by a mapping of its name and options: the name and the options."""
    values = dict(spec) if isinstance(spec, dict) else {"name": spec}
    name = values.pop("name", None)
    if not isinstance(name, str):
        raise ValueError(f"a mapping of the {what} needs its name (name: ...)")
    return name, values


def _component(spec: str | dict[str, Any], what: str, registry: Any, options: Any) -> str | dict[str, Any]:
    """`spec` when it names a registered component whose options model (`options(name, values)`) takes its options;
    a mapping is written out whole."""
    name, values = _name_and_values(spec, what)
    _registered(registry, what, name)
    checked = options(name, values).model_dump(mode="json")
    return {"name": name, **checked} if isinstance(spec, dict) else spec


RETIRED = {"lora_r": "r", "lora_alpha": "alpha", "lora_dropout": "dropout", "lora_target_modules": "target_modules"}


def upgrade_retired(values: dict[str, Any]) -> dict[str, Any]:
    """Option values written before their components owned them (a config.yaml or sweep protocol of an older run):
    the shorthands' flat keys (`temperature`, ...) go into their components, the `lora_*` keys become the adapter's options where they differ from the defaults, `no_bias_correction` AdamW's;
    each as the mapping a run writes (whole)."""
    values = fold_shorthands(values, RUN_SHORTHANDS, RunConfig.model_fields)
    if values.pop("no_bias_correction", False):
        from mtbio.training.optimizers import optimizer_options

        name, options = _name_and_values(values.get("optimizer", "adamw"), "optimizer")
        options = optimizer_options(name, {**options, "bias_correction": False}).model_dump(mode="json")
        values["optimizer"] = {"name": name, **options}
    old = {RETIRED[key]: values.pop(key) for key in list(values) if key in RETIRED}
    if old and values.get("adapter") == "lora":
        from mtbio.model.adapters import LoraOptions

        defaults = LoraOptions().model_dump(mode="json")
        given = {key: value for key, value in old.items() if value != defaults[key]}
        values["adapter"] = {"name": "lora", **LoraOptions(**given).model_dump(mode="json")} if given else "lora"
    return values


class Section(BaseModel):
    """Options that belong together, held by one field of a config as a mapping (config.yaml writes it so, a config
    file may give either the mapping or the flat names). Each option keeps its own flag and reads as an attribute of
    the config: `config.packing` is `config.speed.packing`."""

    model_config = ConfigDict(extra="forbid")


def section(model: type[Section], help: str) -> Any:
    """A config field holding the options of `model` (no flag of its own: its options have theirs)."""
    return Field(default_factory=model, description=help, json_schema_extra={"group": None, "section": True})


class Speed(Section):
    """How batches are cut and run: the same training (length bucketing: the same examples in other batches), in
    less time or memory."""

    bucket_window: int = option(200, "Length bucketing: batches are cut from length-sorted windows of this many "
                                "batches (1 = random batches, as the HF Trainer draws them). Packed tasks draw "
                                "random batches.", ge=1)
    packing: bool = option(True, "Tagging tasks draw random batches and run them as packed rows, each sentence "
                           "attending only to itself (off: length-bucketed batches like the other tasks).")
    sub_batches: int = option(1, "Run each batch as up to N length-sorted sub-batches whose gradients add up to "
                              "the whole batch's (same training, less padding; 1 = off). Pairs with "
                              "--bucket-window 1.", ge=1)
    compile: bool = option(False, "torch.compile the encoder: fewer, fused kernels (worth it on a GPU; compiling "
                           "takes a minute or more before the first step).", resumable=True)
    pad_multiple: int | None = option(None, "Round each training batch's width up to a multiple of N: padding "
                                      "that the attention mask hides, so the same training. Fewer distinct "
                                      "shapes for the matmul libraries to plan for (GPU tensor cores, oneDNN's "
                                      "primitive cache on a CPU), at the price of padded work.",
                                      shown="8 on a GPU and for bf16 on a CPU, else none", ge=1, resumable=True)
    activation_checkpointing: int = option(0, "Keep only the input of every Nth encoder layer in the forward pass "
                                           "and recompute that layer in the backward pass, with the same dropout "
                                           "masks (1: every layer; 0: off): less memory for long sequences, for up "
                                           "to a third more compute.", ge=0, resumable=True)


class Stabilize(Section):
    """Fine-tuning stabilization and layer removal (seed 001; mtbio.training.stabilize)."""

    freeze_layers: int | None = option(None, "Freeze the embeddings and the lowest K encoder layers.", ge=0)
    layerwise_lr_decay: float | None = option(None, "Layer l of L trains at lr*g^(L-l), embeddings lr*g^L.",
                                              gt=0, le=1)
    reinit_layers: int | None = option(None, "Re-initialise the top K encoder layers before training.", ge=1)
    drop_top_layers: int | None = option(None, "Remove the top K encoder layers (the saved encoder is shallower).",
                                         ge=1)


class Records(Section):
    """What a run writes as it goes: trackers, training curves and checkpoints."""

    report_to: list[str] = option([], "Experiment trackers that also get the run's config and metrics, through "
                                  "Accelerate: tensorboard, wandb, mlflow, trackio, comet_ml, aim, clearml, dvclive, "
                                  "swanlab (comma-separated; each needs its package installed, e.g. "
                                  "pip install 'mtbio[tensorboard]'). metrics.jsonl is always written.",
                                  comma=True, shown="none", resumable=True)
    log_every: int = option(50, "Write training curves to metrics.jsonl every N steps: per-task training loss, "
                            "learning rate, gradient norm, examples/s (and at the last step).", ge=1, resumable=True,
                            per_cell=True)
    save_every: int | None = option(None, "Checkpoint every N steps.", shown="each epoch", ge=1, resumable=True,
                                    per_cell=True)

    @field_validator("report_to")
    @classmethod
    def _known_trackers(cls, names: list[str]) -> list[str]:
        from accelerate.utils import LoggerType

        known = [t.value for t in LoggerType if t.value != "all"]
        names = [] if names == ["none"] else names
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown tracker(s) {', '.join(unknown)} (known: none, {', '.join(known)})")
        return names


class Evaluation(Section):
    """When and how a run scores dev (and test), and what it scores beside it."""

    evaluations: int = option(10, "About how many dev evaluations (and checkpoints) a run makes at epoch ends when "
                              "--eval-every is not given; the run's end always evaluates.", ge=1)
    eval_every: int | None = option(None, "Evaluate on dev every N steps.", shown="each epoch", ge=1, resumable=True)
    eval_batch_size: int = option(64, "Batch size for evaluation and prediction.", ge=1, resumable=True)
    eval_test: bool = option(False, "Score test once at the end, with the best-dev weights.", resumable=True)
    baselines: bool = option(True, "Score each task's no-training baselines (trivial aside: a probe on frozen "
                             "features, the zero-shot cosine of pairs) on the run's own data, cached, and warn when "
                             "the trained score is below them.", resumable=True)
    patience: int | None = option(None, "Stop after N dev evaluations in a row without improvement.", shown="off",
                                  ge=1, resumable=True)


class Steps(Section):
    """The step floor: how many optimizer steps a small training set gets."""

    min_steps: int | None = option(None, "A floor on the optimizer steps: a small training set runs more epochs "
                                   "until it reaches this many (--max-steps wins).", ge=1, resumable=True)
    max_epochs: int | None = option(None, "A cap on the epochs --min-steps may add: the step floor stops at this many "
                                    "passes over the training data (--epochs and --max-steps win).", ge=1,
                                    resumable=True)


class Update(Section):
    """What each optimizer update is shrunk, pulled back and clipped by."""

    weight_decay: float = option(0.01, "AdamW weight decay (not on biases and LayerNorm).", ge=0)
    l2sp: float = option(0.0, "L2-SP: after every step pull the encoder's weights toward those the run started "
                         "from, θ ← θ − lr·α·(θ − θ₀) (decoupled, as AdamW's decay); 0 is off.", ge=0)
    max_grad_norm: float = option(1.0, "Gradient clipping norm.", gt=0)


class RunConfig(BaseModel):
    """Every run option, defined once: its type, default, limits and help. The CLI options, the YAML
    config keys (same names, dashes or underscores) and the saved `config.yaml` all come from here."""

    model_config = ConfigDict(extra="forbid")
    shorthands: ClassVar[dict[str, FieldInfo]]  # flags that set a component's option (`RUN_SHORTHANDS`)

    def __getattr__(self, name: str) -> Any:
        """A section's option read as the config's own (`config.packing`: `config.speed.packing`)."""
        owner = section_of(type(self)).get(name)
        if owner is None:
            return super().__getattr__(name)  # type: ignore[misc]
        return getattr(getattr(self, owner), name)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied, where a section's option may be named flat (`{"packing": False}`)."""
        owners = section_of(type(self))
        update = dict(update or {})
        for name in [key for key in update if key in owners]:
            part = owners[name]
            update[part] = update.get(part, getattr(self, part)).model_copy(update={name: update.pop(name)})
        return super().model_copy(update=update, deep=deep)

    tasks: list[str] = option([], "Comma-separated task names or aliases (bc5cdr = both BC5CDR tasks).", comma=True,
                              per_cell=True)
    domain: str | None = option(None, "A named group of tasks from domains.yml (biomedical, clinical, "
                                "clinical-public, blue, blurb).", per_cell=True)
    encoder: str | None = option(None, "HF model name or local directory.", shown="the packaged MiniLM-L6")
    recipe: str = option("auto", "Training recipe: option values tuned for an encoder, a shipped name (minilm, "
                         "mt-bert) or a YAML file; auto picks by encoder (the packaged MiniLM gets minilm, other "
                         "encoders mt-bert). --config and flags win over it; config.yaml records the one applied.",
                         per_cell=True)
    from_run: str | None = option(None, "A refine run directory whose encoder to fine-tune.", group="finetune",
                                  flag="--from")
    finetune_heads: Literal["refined", "new"] = option(
        "refined", "Fine-tuning from a refine run: start each task's head from the run's refined head (as MT-DNN "
        "fine-tunes), or from a new one.", group="finetune")
    data_dir: str | None = option(None, "Where the datasets live.", envvar="MTBIO_DATA_DIR", shown="$MTBIO_DATA_DIR", resumable=True,
                                  per_cell=True)
    output: str | None = option(None, "Run directory to write.", shown="under runs/", resumable=True, per_cell=True)
    task_defs: list[str] = option([], "Extra directory of task definitions (repeatable).", resumable=True,
                                  per_cell=True)

    epochs: int = option(3, "Passes over the training data.", ge=1, resumable=True)
    max_steps: int | None = option(None, "Optimizer steps in all (wins over --epochs).", ge=1, resumable=True)
    pooling: str = option(
        "task", "What sentence-level heads read: each task's own `pooling`, or a registered pooling (the names "
        "listed, a plugin's included) for every task; auto: "
        "the encoder's sentence-transformers pooling where it has one (the packaged MiniLM: mean), else the pooling "
        "of the head a task starts from, else the task's own. The resolved pooling is in the run's tasks/*.yml.",
        choices=lambda: ["task", "auto", *_pooling_names()])
    pair_form: Literal["task", "auto", "cross", "bi"] = option(
        "task", "How a classification or regression of two texts is trained: each task's own type; cross, the pair "
        "encoded together; bi, each text encoded on its own and their cosine classified or regressed "
        "(cosine_classification, cosine_regression); auto, per task the "
        "form whose linear probe on the frozen encoder scores higher in 5-fold cross-validation on the training "
        "examples (bi only when strictly higher). The resolved type is in the run's tasks/*.yml.")
    lp_ft: bool = option(False, "Fit each new head on the frozen encoder's features before the encoder moves (LP-FT, "
                         "Kumar et al. 2022: the probe's logistic or ridge regression as the head's start, a new "
                         "sentence-level head reading the probe's mean pooling unless --pooling names one; the start, "
                         "fitted or from saved heads, is evaluated on dev before the first step, a candidate for the "
                         "kept weights).")
    thresholds: Literal["fixed", "fit"] = option(
        "fixed", "Decision thresholds: fixed, a multi-label task's `threshold` for every label and the argmax for a "
        "classification; fit, per label the one with the best F1 on (up to 2,000 of) the training examples, and for "
        "a classification scored by micro F1 without its `negative_label` (a positive-class F1) the negative class's "
        "probability threshold with the best such F1 there where it beats the argmax; refitted before each dev "
        "evaluation and saved with the head (an export folds a two-class threshold into the bias, refuses more).")
    batch_size: int = option(32, "Global batch size (examples per optimizer step).", ge=1)
    grad_accum: int = option(1, "Gradient accumulation steps.", ge=1)
    lr: float | None = option(None, "Peak learning rate.", shown=f"refine/single-task {REFINE_LR:g}, fine-tune "
                              f"{FINETUNE_LR:g}", gt=0)
    warmup: float = option(0.1, "Warm-up fraction of the steps (linear warm-up, then linear decay).", ge=0, lt=1)
    schedule: str = option("linear", "Learning-rate schedule after the warm-up, a registered name "
                           "(`mtbio components schedules` lists them; linear: decay to 0).")
    optimizer: str | dict[str, Any] = option(
        "adamw", "Optimizer, a registered name (`mtbio components optimizers` lists them; adamax is MT-DNN's "
        "choice); or a YAML mapping with its options, {name: adamw, betas: [0.9, 0.98], "
        "eps: 1.0e-6}.")
    mixed_precision: Literal["no", "bf16", "fp16"] | None = option(
        None, "Mixed precision: bf16 on CPUs with AVX512-BF16/AMX and recent GPUs, fp16 on GPUs only. Given, it "
        "wins over Accelerate's setting (with a warning where they differ).",
        shown="Accelerate's (accelerate config / accelerate launch --mixed_precision), else no")
    seed: int = option(42, "Seeds the model init, dropout and the mixer.", ge=0, per_cell=True)
    max_length: int | None = option(None, "Override every task's max_length (tokens).", shown="per task", ge=8)
    max_eval_examples: int | None = option(None, "Score at most this many dev (and test) examples per task: a fixed "
                                           "subset, the same in every run, recorded in results.json and marked in "
                                           "every table. For quick runs; studies keep the full dev sets.",
                                           shown="all", ge=1)
    max_train_examples: int | None = option(None, "Use at most this many training examples per task.",
                                            shown="all", ge=1)
    task_examples: list[str] = option([], "One task's own training cap, TASK=N (comma-separated or repeated); wins "
                                      "over --max-train-examples for that task. For a small-data target beside "
                                      "full-size partners (select, pairwise, refine).", comma=True)

    speed: Speed = section(
        Speed, "How batches are cut and run: the same training (length bucketing: the same examples in other batches), less time or memory.")
    stabilize: Stabilize = section(
        Stabilize, "Fine-tuning stabilization and layer removal (seed 001; mtbio.training.stabilize).")
    logging: Records = section(Records, "What a run writes as it goes: trackers, training curves and checkpoints.")
    evaluation: Evaluation = section(
        Evaluation, "When and how a run scores dev (and test), and what it scores beside it.")
    steps: Steps = section(Steps, "The step floor: how many optimizer steps a small training set gets.")
    update: Update = section(Update, "What each optimizer update is shrunk, pulled back and clipped by.")

    mixer: str | dict[str, Any] = option(
        "proportional", "Mini-batch mixer strategy, a registered name (`mtbio components mixers` lists them), or a "
        "YAML mapping of the name and its options, e.g. {name: annealed, anneal_to: 0.5}; --temperature, "
        "--temperature-cap, --main-task and --aux-ratio are shorthands for its options.")
    weighting: str | dict[str, Any] = option(
        "fixed", "Loss weighting, a registered name (`mtbio components weightings` lists them; fixed: each task's "
        "loss_weight; uncertainty: a learned log-variance per task, Kendall et al. 2018), or a YAML mapping of the "
        "name and its options, e.g. {name: uncertainty, lr: 0.01}.")

    select_by: Literal["mean", "per-task"] = option(
        "mean", "Which dev evaluation's weights a joint run keeps: mean, the best mean of the tasks' primary scores "
        "(encoder/, heads/); per-task, also each task's own best evaluation, its encoder and head under "
        "best/<task>/ (one encoder copy per task on disk), which finetune --from, export and a one-task predict "
        "then take; test (--eval-test) is scored with each task's own.", flag="--select")
    resume: bool = option(False, "Continue from the newest complete checkpoint.", resumable=True, per_cell=True)
    skip_nonfinite: bool = option(False, "Skip (and log) a batch whose loss is NaN/inf instead of stopping.", resumable=True)

    adapter: str | dict[str, Any] = option(
        "none", "An adapter on the frozen encoder, a name registered in mtbio.model.adapters: lora trains one LoRA "
        "adapter per task (PEFT) with the heads, each batch through its task's adapter; the run's encoder/ stays the "
        "base encoder, each adapter is saved beside its head (heads/<task>/adapter/). Its options as a mapping, "
        "--adapter '{name: lora, r: 16, alpha: 32, dropout: 0.1, target_modules: [query, value]}' (defaults: r 8, "
        "alpha 16, dropout 0.1, PEFT's targets for the model type).")

    seeds: int | Literal["auto"] | None = option(
        None, "Runs per setting, with seeds --seed, --seed+1, ... (finetune: each into <output>/<task>/seed-<s>/). "
        "pairwise: auto = adaptive seeds, 3 to start and more for undecided edges up to --max-seeds (default "
        f"{AUTO_MAX_SEEDS}).", group="seeds", shown="finetune 1, pairwise/stilt/affinity 3")
    @model_validator(mode="before")
    @classmethod
    def _apply_recipe(cls, values: Any) -> Any:
        """Fill the options not given with the recipe's values, and record which recipe that was."""
        if not isinstance(values, dict):
            return values
        from mtbio.training.recipes import choose, recipe_values

        values = fold_shorthands(upgrade_retired(values), cls.shorthands, cls.model_fields)
        name = choose(str(values.get("recipe") or "auto"), values)
        recipe = fold_shorthands(recipe_values(name), cls.shorthands, cls.model_fields)
        merged = {**recipe, **values, "recipe": name}
        for part in sections_of(cls):  # a section's options given win over the recipe's, the others stay
            if part in recipe and part in values:
                merged[part] = {**as_mapping(recipe[part]), **as_mapping(values[part])}
        return merged

    @field_validator("pooling")
    @classmethod
    def _registered_pooling(cls, name: str) -> str:
        if name not in ("task", "auto", *_pooling_names()):
            raise ValueError(f"unknown pooling '{name}' (task, auto, or a registered one: {', '.join(_pooling_names())})")
        return name

    @field_validator("task_examples")
    @classmethod
    def _task_caps(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            name, _, count = entry.partition("=")
            if not name or not count.isdigit() or int(count) < 1:
                raise ValueError(f"--task-examples {entry!r}: expected TASK=N with N a positive number of examples")
        return entries

    @field_validator("optimizer")
    @classmethod
    def _registered_optimizer(cls, spec: str | dict[str, Any]) -> str | dict[str, Any]:
        from mtbio.training.optimizers import OPTIMIZERS, optimizer_options

        return _component(spec, "optimizer", OPTIMIZERS, optimizer_options)

    def optimizer_spec(self) -> tuple[str, dict[str, Any]]:
        """The optimizer's name and options."""
        return _name_and_values(self.optimizer, "optimizer")

    @field_validator("schedule")
    @classmethod
    def _registered_schedule(cls, name: str) -> str:
        from mtbio.training.schedules import SCHEDULES

        return _registered(SCHEDULES, "schedule", name)

    @field_validator("mixer")
    @classmethod
    def _registered_mixer(cls, spec: str | dict[str, Any]) -> str | dict[str, Any]:
        from mtbio.data.mixers import MIXERS, mixer_options  # the strategies import torch: not for --help

        name, values = _name_and_values(spec, "mixer")
        _registered(MIXERS, "mixer strategy", name)
        for key, field in MIXERS.get(name).options.model_fields.items():
            if field.is_required() and values.get(key) is None:
                raise ValueError(f"--mixer {name} needs {flag_of(cls.shorthands, 'mixer', key)} ({field.description})")
        return _component(spec, "mixer strategy", MIXERS, mixer_options)

    @model_validator(mode="after")
    def _auto_seeds(self) -> "RunConfig":
        """--seeds auto: the adaptive design (`adaptive_seeds`)."""
        if self.seeds == "auto":
            self.adaptive_seeds()
        elif self.seeds is not None and self.seeds < 1:
            raise ValueError("--seeds must be at least 1 (or auto)")
        return self

    def adaptive_seeds(self) -> None:
        """--seeds auto: a run takes a fixed number of seeds; a study's config (`StudyConfig`) writes the adaptive
        design out."""
        raise ValueError("this command runs a fixed number of seeds: give --seeds N (adaptive seeds, --seeds auto or "
                         "--max-seeds, are for pairwise and select)")

    @field_validator("weighting")
    @classmethod
    def _registered_weighting(cls, spec: str | dict[str, Any]) -> str | dict[str, Any]:
        from mtbio.model.weightings import WEIGHTINGS, weighting_options  # the methods import torch

        return _component(spec, "loss weighting", WEIGHTINGS, weighting_options)

    def weighting_spec(self) -> tuple[str, dict[str, Any]]:
        """The loss weighting's name and options."""
        name, values = _name_and_values(self.weighting, "loss weighting")
        from mtbio.model.weightings import weighting_options

        return name, weighting_options(name, values).model_dump()

    @field_validator("adapter")
    @classmethod
    def _registered_adapter(cls, spec: str | dict[str, Any]) -> str | dict[str, Any]:
        from mtbio.model.adapters import ADAPTERS, adapter_options  # PEFT's adapters act on torch modules

        return _component(spec, "adapter", ADAPTERS, adapter_options)

    def adapter_spec(self) -> tuple[str, Any]:
        """The adapter's name and its options model."""
        name, values = _name_and_values(self.adapter, "adapter")
        from mtbio.model.adapters import adapter_options

        return name, adapter_options(name, values)

    @model_validator(mode="after")
    def _adapter_options(self) -> "RunConfig":
        whole_encoder = [flag for flag, value in (("--freeze-layers", self.freeze_layers),
                                                  ("--reinit-layers", self.reinit_layers),
                                                  ("--layerwise-lr-decay", self.layerwise_lr_decay)) if value is not None]
        adapter = self.adapter_spec()[0]
        if adapter != "none" and whole_encoder:
            raise ValueError(f"{', '.join(whole_encoder)}: options for training the whole encoder; --adapter {adapter} "
                             "keeps the encoder frozen and trains only the adapters and heads")
        return self

    def mixer_spec(self) -> tuple[str, dict[str, Any]]:
        """The mixer's name and its options (checked by its options model)."""
        from mtbio.data.mixers import mixer_options

        name, values = _name_and_values(self.mixer, "mixer")
        return name, mixer_options(name, values).model_dump()

    def learning_rate(self, default: float) -> float:
        return self.lr if self.lr is not None else default


def _mixer_model(name: str) -> type[BaseModel] | None:
    from mtbio.data.mixers import MIXERS

    return MIXERS.get(name).options if name in MIXERS else None


OPTIONS_OF["mixer"] = _mixer_model
RUN_SHORTHANDS: dict[str, FieldInfo] = {
    "temperature": shorthand("mixer", "temperature", float, 2.0, "Temperature T of the temperature mixer "
                             "(p ∝ n^(1/T)).", gt=0),
    "temperature_cap": shorthand("mixer", "cap", int, None, "Cap on a task's size in the temperature mixer.",
                                 shown="none", ge=1),
    "main_task": shorthand("mixer", "main_task", str, None, "Main task of the ratio mixer."),
    "aux_ratio": shorthand("mixer", "ratio", float, 1.0, "Auxiliary batches per main-task batch (ratio mixer).", gt=0),
}
RUN_SHORTHANDS.update(section_shorthands(RunConfig))
RunConfig.shorthands = RUN_SHORTHANDS


def run_options() -> list[str]:
    """The options that shape one training run (the 'training' and 'finetune' groups)."""
    return [name for name, field in flat_fields(RunConfig).items()
            if (field.json_schema_extra or {}).get("group") in ("training", "finetune")]


def fixed_on_resume() -> list[str]:
    """The options a resumed run must keep: every training option not marked `resumable`."""
    fields = flat_fields(RunConfig)
    return [name for name in run_options() if not (fields[name].json_schema_extra or {}).get("resumable")]


def protocol_options() -> list[str]:
    """A sweep's protocol: the training options every cell of a sweep shares (checked when the sweep is
    run again), that is every 'training' option not marked `per_cell`. The options of the other groups
    are the commands' own (the sweep's design, launchers, predictors; fine-tuning sources set per cell)."""
    return [name for name, field in flat_fields(RunConfig).items()
            if (extra := field.json_schema_extra or {}).get("group") == "training" and not extra.get("per_cell")]


def build_config(file_values: dict[str, Any], cli_values: dict[str, Any], source: str = "config",
                 model: type[RunConfig] | None = None) -> RunConfig:
    """Defaults < config file < flags given on the command line; a `RunConfig`, or the `model` given (a study's)."""
    merged = {**file_values, **cli_values}
    try:
        return (model or RunConfig).model_validate(merged)
    except ValidationError as exc:
        lines = []
        sections = sections_of(model or RunConfig)
        for err in exc.errors():
            loc = err["loc"][1:] if err["loc"] and err["loc"][0] in sections else err["loc"]  # a section's option
            key = ".".join(str(x) for x in loc)
            msg = "unknown option" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: '{key}': {msg}" if key else f"{source}: {msg}")
        raise MtbioError("\n".join(lines)) from None


def save_config(config: RunConfig, path: Path) -> None:
    write_text(path, yaml.safe_dump(config.model_dump(), sort_keys=False))
