"""The `mtbio` command line: parse options, call one library function, print the result.

No logic lives here beyond option parsing and printing; every command calls into the layers
below (tasks → data → model → training → experiments). User-fixable problems (MtbioError) are
printed as one line without a traceback and exit with status 2.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import click

from mtbio.errors import MtbioError

# Reading local files must never wait on the network: datasets' download counter is switched off.
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# mtbio shows its own progress bar; the libraries' per-file load/save bars are noise here.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


# The Hugging Face Trainer's names for options mtbio names otherwise (underscores or dashes).
TRAINER_NAMES = {"--learning-rate": "--lr", "--num-train-epochs": "--epochs",
                 "--per-device-train-batch-size": "--batch-size", "--per-device-eval-batch-size": "--eval-batch-size",
                 "--gradient-accumulation-steps": "--grad-accum", "--warmup-ratio": "--warmup",
                 "--max-seq-length": "--max-length", "--output-dir": "--output", "--model-name-or-path": "--encoder",
                 "--bf16": "--mixed-precision bf16", "--fp16": "--mixed-precision fp16", "--eval-steps": "--eval-every",
                 "--save-steps": "--save-every", "--logging-steps": "--log-every", "--optim": "--optimizer",
                 "--resume-from-checkpoint": "--resume", "--early-stopping-patience": "--patience",
                 "--train-file": "--task-defs (a task definition names its files)"}


class _Group(click.Group):
    """Turns MtbioError into one clear line and exit status 2; names mtbio's option for a Trainer-style one."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            ours = TRAINER_NAMES.get(exc.option_name.split("=")[0].replace("_", "-"))
            if ours:
                exc.message = f"No such option: {exc.option_name} (mtbio's name: {ours}; `--help` lists them all)"
                exc.possibilities = None
            raise
        except MtbioError as exc:
            for line in str(exc).splitlines():
                click.echo(f"error: {line}", err=True)
            sys.exit(2)
        finally:
            _end_process_group()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A command of mtbio's own, else the command of a registered study with a `run` (shipped or a plugin's)."""
        found = super().get_command(ctx, cmd_name)
        if found is not None or ctx.resilient_parsing:
            return found
        runnable = _runnable_studies(ctx)
        return _study_command(runnable[cmd_name]) if cmd_name in runnable else None

    def list_commands(self, ctx: click.Context) -> list[str]:
        """mtbio's own commands and the registered studies', by name."""
        return sorted({*super().list_commands(ctx), *_runnable_studies(ctx)})


def _runnable_studies(ctx: click.Context) -> dict[str, Any]:
    """The registered studies that are commands (those with a `run`), plugins' included, by name."""
    from mtbio.registry import load_plugins
    from mtbio.reporting.studies import studies

    load_plugins(ctx.params.get("include_package", ()))  # the group's callback, which loads them too, runs later
    return {study.name: study for study in studies() if study.run is not None}


def _end_process_group() -> None:
    """Shut down the process group `accelerate launch` started (each process, on any exit).

    Left to interpreter shutdown, gloo's worker threads can outlive Python and abort the process (SIGABRT).
    """
    distributed = sys.modules.get("torch.distributed")  # not imported: no group was started
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


@click.group(cls=_Group)
@click.version_option(package_name="mtbio")
@click.option("-v", "--verbose", count=True, help="More log lines (debug).")
@click.option("-q", "--quiet", count=True, help="Errors and results only: no log lines, no progress bars.")
@click.option("--include-package", multiple=True, metavar="MODULE",
              help="Import MODULE first, as a plugin: the kinds, readers, metrics, optimizers, schedules, mixers, "
                   "weightings, reports and studies it registers work in every command, a study with a stage is a "
                   "command (repeatable; also $MTBIO_PLUGINS, comma-separated, and installed packages' "
                   "`mtbio.plugins` entry points).")
def main(verbose: int, quiet: int, include_package: tuple[str, ...]) -> None:
    """Multi-task learning on biomedical and clinical text."""
    from mtbio.logs import configure_console
    from mtbio.registry import load_plugins

    configure_console(verbose - quiet)
    load_plugins(include_package)


# ---- mtbio tasks ... (task definitions and data) ---------------------------------------------
@main.group()
def tasks() -> None:
    """Inspect and validate task definitions and their data."""


@tasks.command("list")
@click.option("--domain", help="Only the tasks of this domain (domains.yml).")
@click.option("--data-dir", help="Where the datasets live (default: MTBIO_DATA_DIR).")
@click.option("--task-defs", multiple=True, help="Extra directory of task definitions (repeatable).")
def tasks_list(domain: str | None, data_dir: str | None, task_defs: tuple[str, ...]) -> None:
    """Table of tasks with the split sizes found under the data directory."""
    from mtbio.reporting.task_tables import tasks_table
    from mtbio.tasks.loading import resolve_data_dir

    click.echo(tasks_table(resolve_data_dir(data_dir), domain, task_defs))


@tasks.command("baselines")
@click.option("--tasks", "task_names", help="Comma-separated task names or aliases.")
@click.option("--domain", help="A named group of tasks (domains.yml).")
@click.option("--task-defs", multiple=True, help="Extra directory of task definitions (repeatable).")
@click.option("--data-dir", help="Where the datasets live (default: MTBIO_DATA_DIR).")
@click.option("--encoder", help="HF model name or local directory (default: the packaged MiniLM-L6).")
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option("--max-train-examples", type=click.IntRange(min=1), help="Cap on the training examples the fitted "
              "baselines see (default: all).")
@click.option("--max-eval-examples", type=click.IntRange(min=1), help="Score at most this many examples of the split "
              "per task, a fixed subset (default: all).")
@click.option("--output", type=click.Path(dir_okay=False), help="Also write the table as JSON.")
def tasks_baselines(task_names: str | None, domain: str | None, task_defs: tuple[str, ...], data_dir: str | None,
                    encoder: str | None, split: str, max_train_examples: int | None, max_eval_examples: int | None,
                    output: str | None) -> None:
    """Each task's score before any training: trivial, the encoder's embedding cosine (pair tasks) and a
    linear probe on its frozen embeddings."""
    from mtbio.experiments.baselines import format_table, no_training_table
    from mtbio.fileio import ensure_writable, write_json
    from mtbio.training.config import build_config

    config = build_config({}, {"tasks": task_names.split(",") if task_names else [], "domain": domain,
                               "task_defs": list(task_defs), "data_dir": data_dir, "encoder": encoder,
                               "max_train_examples": max_train_examples, "max_eval_examples": max_eval_examples})
    if output:
        ensure_writable(output)
    table = no_training_table(config, split)
    click.echo(format_table(table))
    if output:
        write_json(output, table)
        click.echo(f"written: {output}")


@tasks.command("check")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--data-dir", help="Where the datasets live (default: MTBIO_DATA_DIR).")
def tasks_check(path: str, data_dir: str | None) -> None:
    """Validate a task definition and its data; one line per problem, exit status 1 if any."""
    from pathlib import Path

    from mtbio.reporting.task_tables import check_task_file
    from mtbio.tasks.loading import resolve_data_dir

    result = check_task_file(Path(path), resolve_data_dir(data_dir))
    for problem in result.problems:
        click.echo(f"error: {problem}", err=True)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if not result.ok:
        sys.exit(1)
    click.echo(result.summary)


# ---- mtbio components (what the registries hold) ------------------------------------------------
@main.command()
@click.argument("names", nargs=-1)
@click.option("--fill", "fill_paths", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Rewrite the generated lists of this Markdown file (`<!-- generated: NAME -->…"
                   "<!-- /generated -->`) from the registries instead (repeatable).")
def components(names: tuple[str, ...], fill_paths: tuple[str, ...]) -> None:
    """The registered names of each kind of component, the shipped ones and the plugins': a line per registry (task
    kinds, formats, metrics, optimizers, ...), or the lines of the registries NAMES."""
    from pathlib import Path

    from mtbio.experiments.components import components_text, fill_generated
    from mtbio.fileio import write_text

    for path in map(Path, fill_paths):
        text = path.read_text()
        filled = fill_generated(text)
        if filled != text:
            write_text(path, filled)
        click.echo(f"{'filled' if filled != text else 'unchanged'}: {path}")
    if not fill_paths:
        click.echo(components_text(list(names)))


# ---- mtbio data get (the public tasks' files, from their recorded sources) --------------------------
@main.group()
def data() -> None:
    """Fetch the public tasks' data files."""


@data.command("get")
@click.argument("names", nargs=-1)
@click.option("--domain", help="Every task of this domain (domains.yml).")
@click.option("--all", "every", is_flag=True, help="Every public shipped task.")
@click.option("--data-dir", help="Where to put them (default: MTBIO_DATA_DIR).")
@click.option("--dry-run", is_flag=True, help="List each file's URL, size and destination; download nothing.")
def data_get(names: tuple[str, ...], domain: str | None, every: bool, data_dir: str | None, dry_run: bool) -> None:
    """Download tasks' files from the repositories and commits the package records, each verified by its sha256.

    A rerun skips the files already in place and resumes a broken download. Exit status 1 when a file needs a
    manual step (printed) or a task has no downloadable source; 2 when a download fails."""
    from mtbio.data import fetch
    from mtbio.tasks.loading import BUILTIN_TASK_DEFS, load_catalog, resolve_data_dir

    target = resolve_data_dir(data_dir)
    if target is None:
        raise MtbioError("no data directory; pass --data-dir or set MTBIO_DATA_DIR")
    catalog = load_catalog()
    if every:
        names = names + tuple(n for n, t in sorted(catalog.tasks.items())
                              if not t.credentialed and catalog.sources[n].parent == BUILTIN_TASK_DEFS)
    if not names and domain is None:
        raise click.UsageError("name tasks, or pass --domain or --all")
    data_plan = fetch.plan(catalog.resolve(names, domain))
    if dry_run:
        for line in fetch.dry_run(data_plan, target):
            click.echo(line)
    else:
        done = fetch.fetch(data_plan, target)
        click.echo(f"data get: {done.fetched} files fetched ({done.bytes / 1e6:.1f} MB), {done.present} already in "
                   f"place, under {target}")
    for task, step in data_plan.manual:
        click.echo(f"{step.dest} ({task}) is not downloadable as is: {step.instructions(target)}", err=True)
    for task, why in data_plan.unavailable:
        click.echo(f"task '{task}': {why}", err=True)
    if (data_plan.manual or data_plan.unavailable) and not dry_run:
        click.echo(f"not complete: {len(data_plan.manual)} file(s) need the manual step above, "
                   f"{len(data_plan.unavailable)} task(s) have no downloadable source", err=True)
        sys.exit(1)


# ---- training stages --------------------------------------------------------------------------
def _comma_list(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _option_from_field(name: str, field: Any) -> Any:
    """The click option of one `RunConfig` field: flag, type, help and shown default all from the field."""
    import types
    import typing

    extra = field.json_schema_extra or {}
    flag = extra.get("flag") or "--" + name.replace("_", "-")
    kind = field.annotation
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # `int | None` → int; `int | "auto"` → both
        choices = [a for a in typing.get_args(kind) if a is not type(None)]
        if any(typing.get_origin(a) is dict for a in choices):  # a component: its name, or a mapping with options
            kind = _Component()
        else:
            kind = _IntOrWord(typing.get_args(choices[1])) if len(choices) == 2 and choices[0] is int else choices[0]
    default = [] if field.default_factory is list else field.default
    if isinstance(default, bool):
        default = "on" if default else "off"
    shown = extra.get("shown") or (None if default in (None, []) else str(default))
    settings: dict[str, Any] = {"help": field.description + (f"  [default: {shown}]" if shown else "")}
    if extra.get("envvar"):
        settings["envvar"] = extra["envvar"]
    if kind is bool:
        if "/" not in flag:
            flag = f"{flag}/--no-{flag[2:]}"
        settings["default"] = None
    elif typing.get_origin(kind) is list:
        if extra.get("comma"):
            settings["callback"] = _comma_list
        else:
            settings["multiple"] = True
    elif typing.get_origin(kind) is typing.Literal:
        settings["type"] = click.Choice(list(typing.get_args(kind)))
    elif extra.get("choices"):
        settings["type"] = _Registered(extra["choices"])
    elif kind in (int, float) or isinstance(kind, click.ParamType):
        settings["type"] = kind
    return click.option(flag, name, **settings)


class _Component(click.ParamType):
    """A component's name, or a YAML mapping of its name and options: `--adapter '{name: lora, r: 16}'`."""

    name = "component"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "NAME|'{name: NAME, OPTION: VALUE}'"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str) or not value.lstrip().startswith("{"):
            return value
        import yaml

        try:
            mapping = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            self.fail(f"{value!r} is not a YAML mapping ({' '.join(str(exc).split())})", param, ctx)
        if not isinstance(mapping, dict):
            self.fail(f"{value!r} is not a YAML mapping", param, ctx)
        return mapping


class _Registered(click.Choice):
    """One name of a registry, read when first needed (a value to check, a command's `--help`), not when the CLI
    loads: a registry of `mtbio.experiments.components` by name, or a function giving the names (a plugin's
    included)."""

    def __init__(self, names: str | Callable[[], Any]) -> None:  # no fixed list for Choice.__init__ to keep
        self.names = names
        self.case_sensitive = True

    @property
    def choices(self) -> list[str]:  # type: ignore[override]
        if callable(self.names):
            return list(self.names())
        from mtbio.experiments.components import component_names

        return component_names(self.names)


class _IntOrWord(click.ParamType):
    """An integer, or one of a few words (`--seeds auto`)."""

    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = words
        self.name = "|".join(["INTEGER", *words])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) or value in self.words:
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is neither an integer nor {' / '.join(self.words)}", param, ctx)


def config_options(*groups: str) -> Any:
    """Decorate a command with the options of the `RunConfig` and `StudyConfig` fields and shorthands in `groups` (a
    group's name, or one field's) and --config with 'training'."""
    from mtbio.experiments.study_config import StudyConfig

    fields = {**StudyConfig.model_fields, **StudyConfig.shorthands}
    named = set(groups) - {(field.json_schema_extra or {}).get("group") for field in fields.values()}  # one field's
    options = [_option_from_field(name, field) for name, field in fields.items()
               if (field.json_schema_extra or {}).get("group") in groups or name in named]
    if "training" in groups:
        options.insert(0, click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
                                       help="YAML file of option values (same names as the flags; flags win)."))

    def decorate(func: Any) -> Any:
        for make in reversed(options):
            func = make(func)
        return func

    return decorate


training_options = config_options("training")


def _run_config(values: dict[str, Any], study: bool = False) -> Any:
    """The command's config from its options and --config file: a `RunConfig`, or a `StudyConfig` for a study."""
    from mtbio.experiments.study_config import StudyConfig
    from mtbio.training.config import build_config
    from mtbio.training.option_files import read_config_file

    config_file = values.pop("config_file", None)
    file_values = read_config_file(config_file) if config_file else {}
    given = {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items() if v not in (None, ())}
    return build_config(file_values, given, source=config_file or "options", model=StudyConfig if study else None)


def _print_results(run_dir: Any, results: dict[str, Any]) -> None:
    from accelerate import PartialState

    if not PartialState().is_main_process:  # several processes: print once
        return
    click.echo(f"\n{results['stage']} run: {run_dir}")
    for split in ("dev", "test"):
        for task, scores in results.get(split, {}).items():
            shown = ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
            click.echo(f"  {split:4s} {task}: {shown}")
    click.echo(f"  train throughput: {results['train_examples_per_second']:.1f} examples/s")


@main.command()
@training_options
def refine(**values: Any) -> None:
    """MT-BERT-Refinement: train the shared encoder on several tasks jointly."""
    from mtbio.experiments.refine import refine as run_refine
    from mtbio.training.trainer import StopRequested

    try:
        run_dir, results = run_refine(_run_config(values))
    except StopRequested:
        raise MtbioError("stopped by a signal after saving a checkpoint; run the same command with --resume") from None
    _print_results(run_dir, results)


@main.command()
@config_options("finetune")
@click.option("--task", "task", callback=_comma_list, help="Task to fine-tune (same as --tasks).")
@config_options("seeds", "training")
def finetune(task: list[str] | None, **values: Any) -> None:
    """MT-BERT-Fine-Tune per task from a refined run (--from), or a single-task baseline (--encoder)."""
    from mtbio.experiments.finetune import finetune as run_finetune
    from mtbio.training.trainer import StopRequested

    if task:
        values["tasks"] = (values.get("tasks") or []) + task
    try:
        runs = run_finetune(_run_config(values))
    except StopRequested:
        raise MtbioError("stopped by a signal after saving a checkpoint; run the same command with --resume") from None
    for run_dir, results in runs:
        _print_results(run_dir, results)
    from mtbio.reporting.tables import seed_summary

    summary = seed_summary(runs)  # mean ± sd per task when it ran with several seeds
    if summary:
        click.echo("\n" + summary)


precision_option = click.option(
    "--mixed-precision", "precision", type=click.Choice(["auto", "no", "bf16"]), default="auto", show_default=True,
    help="Inference precision: auto = the precision the run was trained in (bf16 scores dev sets about 2.6x faster on "
         "CPUs with AVX512-BF16/AMX; ChemProt/DDI dev micro F1 within 0.001/0.006 of fp32), where the hardware has it; no = fp32.")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--tasks", callback=_comma_list, help="Only these tasks.")
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option("--data-dir", envvar="MTBIO_DATA_DIR", help="Where the datasets live (or MTBIO_DATA_DIR).")
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="JSON file to write (default: <first run>/evaluation-<split>.json).")
@precision_option
@click.option("--save-predictions", is_flag=True,
              help="Write each run's predictions to <run>/predictions/<split>-<task>.jsonl and print a per-type table "
                   "(entity types, positive labels) whose counts add up to the micro F1.")
@click.option("--max-eval-examples", type=click.IntRange(min=1),
              help="Score a fixed subset of at most N examples per task.  [default: the run's own setting, else all]")
def evaluate(run_dirs: tuple[str, ...], tasks: list[str] | None, split: str, data_dir: str | None,
             batch_size: int, output: str | None, precision: str, save_predictions: bool,
             max_eval_examples: int | None) -> None:
    """Score runs on dev or test; one row per run (a folder of fine-tuned runs is one row)."""
    from pathlib import Path

    from mtbio.experiments.evaluate import evaluate_paths, format_evaluation_table
    from mtbio.fileio import ensure_writable, write_json
    from mtbio.tasks.loading import resolve_data_dir

    target = ensure_writable(Path(output) if output else Path(run_dirs[0]) / f"evaluation-{split}.json")
    table = evaluate_paths([Path(p) for p in run_dirs], split, resolve_data_dir(data_dir), tasks or (), batch_size,
                           precision=precision, save_predictions=save_predictions, max_examples=max_eval_examples)
    click.echo(format_evaluation_table(table))
    write_json(target, table)
    click.echo(f"\nwritten: {target}")


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--task", help="Which head to use.")
@click.option("--tasks", help="Several heads, comma-separated: one line per input with each task's prediction; the "
                              "tasks whose inputs tokenize alike share one encoder pass.")
@click.option("--input", "input_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="One input per line (pairs: two texts separated by a tab).")
@click.option("--output", type=click.Path(dir_okay=False), help="JSONL to write (default: <run>/predictions/<task>-<input>.jsonl).")
@click.option("--scores", is_flag=True, help="Add the probabilities: per label, or per word of its tag (tagging).")
@precision_option
def predict(run_dir: str, task: str | None, tasks: str | None, input_path: str, output: str | None, scores: bool,
            precision: str) -> None:
    """Predict labels, tags or scores for raw text with a saved run."""
    from pathlib import Path

    from mtbio.experiments.predict import predict_file

    if (task is None) == (tasks is None):
        raise click.UsageError("give --task NAME, or --tasks a,b,... for several at once")
    names = task if task is not None else [t.strip() for t in str(tasks).split(",") if t.strip()]
    written = predict_file(Path(run_dir), names, Path(input_path), Path(output) if output else None, scores, precision)
    click.echo(f"written: {written}")


@main.command()
@click.option("--output", default="runs/demo", show_default=True, type=click.Path(file_okay=False))
@click.option("--encoder", help="HF model name or local directory (default: the packaged MiniLM-L6).")
@click.option("--epochs", type=int, help="Refinement epochs (default 2).")
def demo(output: str, encoder: str | None, epochs: int | None) -> None:
    """Refine + fine-tune on the samples shipped in the package and print the result table."""
    from pathlib import Path

    from mtbio.experiments.demo import run_demo
    from mtbio.experiments.evaluate import format_evaluation_table

    click.echo(f"demo: writing its runs to {Path(output).resolve()} (refine/, finetune/; --output to choose)")
    table = run_demo(Path(output), encoder, epochs)
    click.echo("\n" + format_evaluation_table(table))
    click.echo(f"\nruns: {output}/refine (refinement) and {output}/finetune/<task> (fine-tuned); try "
               f"`mtbio predict {output}/finetune/demo-ner --task demo-ner --input FILE`")


# ---- studies: each registered study with a stage is a command (`mtbio.reporting.studies`) -------------
def _study_command(study: Any) -> click.Command:
    """`mtbio <study>`: the options of the study's groups; runs its stage and prints its summary (`show`, else its
    `format`) once, from the main process."""
    def run(**values: Any) -> None:
        from accelerate import PartialState

        from mtbio.training.trainer import StopRequested

        try:
            directory, result = study.run(_run_config(values, study=True), echo=click.echo)
        except StopRequested:
            raise MtbioError("stopped by a signal; run the same command again (its finished cells are kept)") from None
        if result is not None and PartialState().is_main_process:  # several processes: print once
            text = study.show(directory, result) if study.show else study.format(result) if study.format else ""
            click.echo("\n" + text)

    return click.command(study.name, help=study.help)(config_options(*study.options)(run))


@main.group("sweep")
def sweep_group() -> None:
    """Inspect a pairwise or STILT sweep directory."""


@sweep_group.command("status")
@click.argument("sweep_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the finished cells' cost (efficiency, time breakdown, "
              "memory) as JSON instead of the table.")
def sweep_status(sweep_dir: str, as_json: bool) -> None:
    """Cells done / running / failed / waiting, their dev scores, what they printed last, the time left, and the
    sweep's efficiency: useful FLOPs over wall time × the machine's matmul peak (measured once and cached)."""
    import json
    from pathlib import Path

    from mtbio.experiments.sweep import read_cells
    from mtbio.experiments.sweep_status import status_table, sweep_cost

    if as_json:
        click.echo(json.dumps(sweep_cost(read_cells(Path(sweep_dir))), indent=1))
    else:
        click.echo(status_table(Path(sweep_dir)))


@sweep_group.command("pack")
@click.argument("study_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--remove", is_flag=True, help="Then delete the directories of the cells it kept that hold no weights "
              "(reports read them from the file).")
def sweep_pack(study_dir: str, remove: bool) -> None:
    """Keep every finished cell below STUDY_DIR (a run directory with results.json) as one line of STUDY_DIR/cells.jsonl:
    its results, config.yaml, task definitions and curve; `mtbio report` and `--rule` read a cell from there once its
    directory is gone. A sweep writes the file itself whenever it writes its summary."""
    from mtbio.run_dir import pack_cells, packed_cells, remove_packed

    path = pack_cells(study_dir)
    click.echo(f"written: {path} ({len(packed_cells(study_dir))} cells)")
    if remove:
        click.echo(f"removed {len(remove_packed(study_dir))} cell directories")


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--task", required=True, help="The task whose head to export.")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@click.option("--push-to-hub", "repo_id", metavar="REPO_ID", help="Also upload the directory to this Hub model repo.")
@click.option("--overwrite", is_flag=True, help="Replace files in --output that mtbio did not write.")
@click.option("--merge-adapter", is_flag=True, help="LoRA runs: merge the task's adapter into the encoder and write a "
              "plain AutoModelFor* directory (default: the PEFT adapter over an AutoModelFor* base in OUTPUT/base).")
def export(run_dir: str, task: str, output: str, repo_id: str | None, overwrite: bool, merge_adapter: bool) -> None:
    """One task of a run as a standard AutoModelFor* directory (config with labels, weights, tokenizer, model card);
    a LoRA run's task as a PEFT adapter over one."""
    from pathlib import Path

    from mtbio.experiments.export import export_task, push_to_hub

    target = export_task(Path(run_dir), task, Path(output), overwrite=overwrite, merge_adapter=merge_adapter)
    loads = ("PeftModel.from_pretrained(AutoModelFor*.from_pretrained(OUTPUT/base), OUTPUT)"
             if (target / "adapter_config.json").is_file() else "transformers' AutoModelFor*.from_pretrained and pipeline()")
    click.echo(f"written: {target} (loads with {loads}; the export's logits were checked against the run's)")
    if repo_id:
        click.echo(f"pushed: {push_to_hub(target, repo_id)}")


def _floats(_ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    try:
        return [float(v) for v in value.split(",")] if value else None
    except ValueError:
        raise click.BadParameter(f"{value!r}: comma-separated numbers", param=param) from None


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--method", type=click.Choice(["ties", "dare_linear", "average"]), default="ties", show_default=True,
              help="ties / dare_linear: PEFT's merge of the task vectors (fine-tuned − base encoder), parameter by "
                   "parameter; average: plain weight averaging.")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Run directory to write.")
@click.option("--density", type=float, default=0.5, show_default=True,
              help="ties / dare_linear: the fraction of each task vector's entries kept.")
@click.option("--weights", callback=_floats, help="One weight per task vector, comma-separated (default: 1 for ties, "
              "1/n for dare_linear, equal for average).")
@click.option("--base", help="The encoder the runs were fine-tuned from (default: their results.json's encoder_source).")
@click.option("--seed", type=int, help="Seeds dare_linear's random drops; also the merged run's seed in `report`'s "
              "tables.  [default: the runs' seed when they share one, else 42]")
@click.option("--score", "splits", multiple=True, type=click.Choice(["dev", "test"]),
              help="Score the merged run on this split and record it in its results.json, as training records it "
                   "(repeatable), so `report` tables it beside trained runs.")
@click.option("--data-dir", envvar="MTBIO_DATA_DIR", help="Where the datasets live (or MTBIO_DATA_DIR); for --score.")
@click.option("--with-start", "alpha", type=float, metavar="ALPHA",
              help="Instead of merging runs: one run's encoder moved back toward the encoder it started from, "
                   "(1 − ALPHA)·start + ALPHA·run, its heads kept (WiSE-FT); ALPHA in [0, 1].")
@click.pass_context
def merge(ctx: click.Context, run_dirs: tuple[str, ...], method: str, output: str, density: float,
          weights: list[float] | None, base: str | None, seed: int | None, splits: tuple[str, ...],
          data_dir: str | None, alpha: float | None) -> None:
    """Merge fine-tuned runs' encoders into one run carrying every run's heads (mtbio evaluate scores it)."""
    from pathlib import Path

    from click.core import ParameterSource

    from mtbio.experiments.merge import interpolate_run, merge_runs, score_merged
    from mtbio.tasks.loading import resolve_data_dir

    if alpha is None:
        target = merge_runs([Path(p) for p in run_dirs], method, Path(output), density, weights, base, seed)
    else:
        given = [f"--{name}" for name in ("method", "density", "weights", "seed")
                 if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
        if len(run_dirs) != 1 or given:
            raise MtbioError("--with-start interpolates one run toward the encoder it started from; give one RUN_DIR"
                             + (f" and no {', '.join(given)} (they merge several runs)" if given else
                                f" (got {len(run_dirs)})"))
        target = interpolate_run(Path(run_dirs[0]), alpha, Path(output), base)
    for split, scores in score_merged(target, splits, resolve_data_dir(data_dir) if splits else None).items():
        click.echo(f"{split}: " + "; ".join(f"{task} " + ", ".join(f"{k} {v:.4f}" for k, v in values.items())
                                           for task, values in scores.items()))
    click.echo(f"written: {target}" + ("" if splits else f" (score it with: mtbio evaluate {target})"))


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option("--label", "labels", multiple=True, help="Column name, one per RUN_DIR in order (default: the folder names).")
@click.option("--output", type=click.Path(),
              help="Also write the markdown table to this file; for a study directory judged under another rule "
                   "(--rule, --looks, --correction, --primary), the folder its re-judged files go to.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False),
              help="CSV to write (default: beside --output; none without either); the JSON it was made from goes "
                   "beside it. The run directories are left as they are.")
@click.option("--trivial/--no-trivial", default=False, show_default=True,
              help="Add each task's trivial score (majority class, all O) as the first column; reads --data-dir.")
@click.option("--data-dir", envvar="MTBIO_DATA_DIR", help="Where the datasets live (or MTBIO_DATA_DIR); for --trivial.")
@click.option("--compare-to", metavar="LABEL",
              help="Add a column testing the last column against the column labelled LABEL per task (per-seed Δ, "
                   "paired t-test, as pairwise judges edges).")
@click.option("--compare-each", is_flag=True,
              help="With --compare-to: test every other column against LABEL, one Δ column each (say, remedies "
                   "against standard fine-tuning), not only the last.")
@click.option("--metric", "metric_overrides", multiple=True, metavar="TASK=METRIC",
              help="Score TASK by another metric its runs saved instead of its primary one, in rows and summaries "
                   "(repeatable), e.g. ddi=macro_f1 for DDI's macro F1 over its four interaction types.")
@click.option("--correction", type=click.Choice(["holm", "bh", "none"]), default="holm", show_default=True,
              help="Multiplicity control across the table's --compare-to tests: holm, bh (Benjamini–Hochberg) or none.")
@click.option("--rule", type=_Registered("rules"),
              help="Decision rule for --compare-to (default v2) and for a study directory's comparisons (default: the "
                   "rule its file was judged by), judged again from their per-seed scores without training: v2 (the "
                   "interval against ±min-delta, level split over looks and family), v3 (v2 and the interval "
                   "against 0: a direction decided apart from its size) or v1 (the rule before, for comparison). "
                   "Another rule than the study's own is printed (and written to --output DIR), not written over "
                   "the study's files unless --in-place.")
@click.option("--in-place", is_flag=True,
              help="With --rule, --looks, --correction or --primary on a study directory: write the re-judged "
                   "files over the study's own.")
@click.option("--power", is_flag=True,
              help="For a study directory: the smallest effect each verdict can reach at its seeds and over its "
                   "comparisons, from --sd or the per-seed sd of Δ measured on its comparisons, and the seeds "
                   "--effect needs.")
@click.option("--sd", type=click.FloatRange(min=0, min_open=True),
              help="With --power: the per-seed sd of Δ, in the metric's units (0.01: one point).")
@click.option("--effect", type=click.FloatRange(min=0, min_open=True),
              help="With --power: the true Δ whose seeds needed are stated (default: twice the threshold).")
@click.option("--primary", metavar="COMPARISON",
              help="Judge this comparison (as the report names it, e.g. ddi->bc5cdr-chem) alone at alpha; the "
                   "others form the secondary family, corrected among themselves.")
@click.option("--looks", metavar="FIRST:LAST",
              help="A study run with adaptive seeds whose file does not record them: its first and last seed count "
                   "(e.g. 3:8), so v2 spends the level over those looks.")
@click.option("--curves", is_flag=True,
              help="Draw each RUN_DIR's training loss and dev score per task against the step into "
                   "RUN_DIR/curves.png (from its metrics.jsonl).")
def report(run_dirs: tuple[str, ...], split: str, labels: tuple[str, ...], output: str | None, csv_path: str | None,
           trivial: bool, data_dir: str | None, compare_to: str | None, compare_each: bool,
           metric_overrides: tuple[str, ...], curves: bool, correction: str, rule: str | None, in_place: bool,
           primary: str | None, power: bool, sd: float | None, effect: float | None, looks: str | None) -> None:
    """Tables of saved results: runs side by side (mean ± sd over seeds), or a sweep's gain matrix.

    Each RUN_DIR is a run, a folder of runs, or a folder of seed runs (one column each); a pairwise
    or stilt sweep directory (relations.json / stilt.json) prints its gain matrix instead; an affinity
    directory prints its predicted matrices, and PAIRWISE_DIR AFFINITY_DIR compares prediction and measurement.
    """
    from pathlib import Path

    from mtbio.experiments.reports import ReportOptions, render_report
    from mtbio.run_dir import packed_below, saved_cell

    for path in map(Path, run_dirs):  # a folder gone is there still when a study's cells.jsonl keeps its runs
        if not path.exists() and saved_cell(path) is None and not packed_below(path):
            raise click.BadParameter(f"Directory '{path}' does not exist.", param_hint="'RUN_DIRS...'")
    options = ReportOptions(split, labels, output, csv_path, trivial, data_dir, compare_to, compare_each,
                            metric_overrides, curves, correction, rule, looks, in_place, primary, power, sd, effect)
    for line in render_report([Path(p) for p in run_dirs], options):
        click.echo(line)


if __name__ == "__main__":  # pragma: no cover
    main()
