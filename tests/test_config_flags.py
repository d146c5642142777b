"""Every run option is a flag, every flag is a RunConfig field, and every field is read by the code (no dead flags)."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mtbio import cli
from mtbio.errors import MtbioError
from mtbio.experiments.study_config import StudyConfig
from mtbio.training.config import RunConfig, build_config, flat_fields

PACKAGE = Path(__file__).resolve().parents[1] / "mtbio"
COMMANDS = ("refine", "finetune", "pairwise", "stilt", "affinity", "select", "transfer")


def _command(name: str) -> click.Command:
    """A command of `mtbio`, a registered study's included (those are made when asked for)."""
    return cli.main.get_command(click.Context(cli.main), name)


def _command_fields(name: str) -> set[str]:
    return {p.name for p in _command(name).params} - {"config_file", "task"}


def test_every_field_is_a_flag_with_help_and_every_flag_a_field() -> None:
    """Options come from RunConfig and StudyConfig alone: each field, and each shorthand for a component's option, is
    an option of some command, with help; a run (refine, finetune) takes run options only, the study options are the
    studies'."""
    options = {**flat_fields(StudyConfig), **StudyConfig.shorthands}
    flags = set().union(*(_command_fields(c) for c in COMMANDS))
    assert flags == set(options)
    assert all(options[f].description for f in options)
    assert _command_fields("refine") | _command_fields("finetune") <= set(flat_fields(RunConfig)) | set(RunConfig.shorthands)
    assert {"alpha", "min_delta", "dry_run", "seeds"} <= _command_fields("pairwise")
    assert {"intermediate", "target"} <= _command_fields("stilt") and "from_run" in _command_fields("finetune")
    assert "from_run" not in _command_fields("refine") and "seeds" not in _command_fields("refine")
    assert {"affinity_every", "affinity_batch_size", "affinity_split", "seeds"} <= _command_fields("affinity")
    assert {"prune", "affinity", "prune_by"} <= _command_fields("pairwise") - _command_fields("affinity")
    assert {"target", "candidates", "top", "verify", "predictor", "seeds", "alpha"} <= _command_fields("select")
    assert "predictor" in _command_fields("affinity") and "candidates" not in _command_fields("affinity")


def test_help_shows_every_default() -> None:
    for command in COMMANDS:
        for param in _command(command).params:
            field = {**StudyConfig.model_fields, **StudyConfig.shorthands}.get(param.name)
            if field is not None and (field.get_default(call_default_factory=True) not in (None, []) or (field.json_schema_extra or {}).get("shown")):
                assert "[default: " in param.help, (command, param.name)
    text = " ".join(CliRunner().invoke(cli.main, ["refine", "--help"]).output.split())
    assert "Global batch size (examples per optimizer step). [default: 32]" in text
    assert "--packing / --no-packing" in text and "[default: on]" in text


def test_every_config_field_is_read_outside_its_definition() -> None:
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "config.py")
    unused = [f for f in flat_fields(RunConfig) if not re.search(rf"\.{f}\b|\"{f}\"|'{f}'|\b{f}=", code)]
    assert unused == []


def test_options_live_in_their_components() -> None:
    """The component options (mixer, ...) are not run options of their own and the others sit in sections: the
    config holds few fields."""
    run_fields = len(RunConfig.model_fields)
    study_fields = len(set(StudyConfig.model_fields) - set(RunConfig.model_fields))
    assert (run_fields, study_fields) == (40, 17)


def test_a_section_option_given_wins_over_the_recipe_and_the_recipe_keeps_the_rest(tmp_path: Path) -> None:
    """--max-epochs is the steps section's option: given, it wins over the recipe's, whose --min-steps stays; a flat
    key and the section's mapping mean the same in a config file; config.yaml writes the mapping, and an older
    config.yaml with flat keys reads as the same config."""
    from mtbio.training.config import flat_values, save_config, upgrade_retired
    import yaml

    config = build_config({}, {"recipe": "minilm", "max_epochs": 1000})
    assert (config.min_steps, config.max_epochs, config.evaluations) == (200, 1000, 5)
    assert config.steps.max_epochs == 1000 and build_config({"steps": {"max_epochs": 1000}}, {"recipe": "minilm"}) == config
    save_config(config, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["steps"] == {"min_steps": 200, "max_epochs": 1000} and "max_epochs" not in saved
    old = flat_values(saved, RunConfig)  # the flat keys a config.yaml had before the sections
    assert RunConfig.model_validate(upgrade_retired(old)) == config
    with pytest.raises(MtbioError, match="'bucket_window': Input should be greater than or equal to 1"):
        build_config({}, {"bucket_window": 0})
    copied = config.model_copy(update={"max_epochs": 3, "packing": False})  # a flat name lands in its section
    assert (copied.steps.max_epochs, copied.min_steps, copied.speed.packing, config.max_epochs) == (3, 200, False, 1000)


def test_a_shorthand_sets_its_components_option_where_flags_and_files_give_it() -> None:
    """--temperature 3 is the mixer's temperature: on the command line, as a flat key of a --config file, and in an
    older run's config.yaml; a flag for another component's option is refused by name."""
    given = CliRunner().invoke(cli.main, ["finetune", "--task", "demo-nli", "--mixer", "annealed", "--temperature", "3"])
    assert given.exit_code != 0 and "--temperature is not an option of --mixer annealed" in given.output
    for values in ({"mixer": "temperature", "temperature": 3}, {"mixer": {"name": "temperature"}, "temperature": 3.0}):
        config = build_config(values, {})
        assert config.mixer == {"name": "temperature", "temperature": 3.0, "cap": None}
        assert "temperature" not in config.model_dump()
    with pytest.raises(MtbioError, match="--main-task is not an option of --mixer temperature"):
        build_config({"mixer": "temperature"}, {"main_task": "a"})
    assert build_config({}, {"temperature": 2.0}).mixer == "proportional"  # at the option's default: nothing set


def test_the_decision_rules_options_are_its_own_and_its_flags_shorthands() -> None:
    """--alpha, --min-delta, --spending and --correction set the rule's options; `rule` is the rule's name or its
    mapping, as the judged comparisons then read it."""
    from mtbio.experiments.common import decision_rule

    config = build_config({"rule": {"name": "v3", "spending": "pocock"}}, {"alpha": 0.01}, model=StudyConfig)
    assert config.rule == {"name": "v3", "alpha": 0.01, "min_delta": None, "spending": "pocock", "correction": "holm"}
    rule = decision_rule(config)
    assert (rule.version, rule.alpha, rule.spending, rule.correction) == ("v3", 0.01, "pocock", "holm")
    assert build_config({}, {}, model=StudyConfig).rule == "v2"
    refused = CliRunner().invoke(cli.main, ["pairwise", "--tasks", "demo-nli,demo-sts", "--alpha", "1.5"])
    assert refused.exit_code != 0 and "--alpha: Input should be less than 1" in refused.output


@pytest.mark.parametrize("flags, component, written", [
    ({"launcher": "slurm", "slurm_partition": "gpu", "cell_gpus": 1}, "launcher",
     {"name": "slurm", "cpus": 1, "gpus": 1, "config": None, "partition": "gpu", "time": None, "account": None}),
    ({"parallel": 2}, "launcher", {"name": "local", "parallel": 2}),
    ({"predictor": "fisher", "predictor_examples": 24}, "predictor", {"name": "fisher", "examples": 24, "head_steps": 50}),
    ({"affinity_every": 10, "affinity_split": "dev"}, "predictor",
     {"name": "cosine", "every": 10, "batch_size": 32, "split": "dev"}),
])
def test_the_launchers_and_predictors_flags_are_shorthands_for_their_options(flags: dict, component: str,
                                                                             written: dict) -> None:
    assert getattr(build_config({}, flags, model=StudyConfig), component) == written


@pytest.mark.parametrize("flags, message", [
    ({"launcher": "ray", "slurm_partition": "gpu"}, "--slurm-partition is not an option of --launcher ray"),
    ({"predictor": "size_ratio", "affinity_every": 5}, "--affinity-every is not an option of --predictor size_ratio"),
    ({"predictor": {"name": "fisher", "steps": 3}}, "steps: not an option of this predictor"),
])
def test_an_option_the_named_component_lacks_is_refused_by_name(flags: dict, message: str) -> None:
    with pytest.raises(MtbioError, match=message):
        build_config({}, flags, model=StudyConfig)


def test_unknown_config_key_is_an_error_naming_it() -> None:
    with pytest.raises(MtbioError, match="'batch_sise': unknown option"):
        build_config({"batch_sise": 8}, {}, source="run.yml")


def test_precision_comes_from_accelerate_unless_the_flag_is_given(monkeypatch, caplog) -> None:
    from mtbio.training.trainer import resolve_mixed_precision

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert resolve_mixed_precision(None) == "no"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # what `accelerate launch --mixed_precision bf16` sets
    assert resolve_mixed_precision(None) == "bf16"
    with caplog.at_level("WARNING", logger="mtbio"):
        assert resolve_mixed_precision("no") == "no"
    assert "--mixed-precision no wins over Accelerate's mixed_precision bf16" in caplog.text


def test_the_resolved_precision_is_what_the_run_records(tmp_path, tiny_encoder, monkeypatch) -> None:
    import yaml

    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.experiments.finetune import finetune

    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    config = RunConfig(tasks=["demo-nli"], task_defs=[str(SAMPLE_DIR / "task_defs")], data_dir=str(SAMPLE_DIR),
                       encoder=tiny_encoder, max_steps=1, batch_size=4, max_train_examples=8, max_length=32,
                       output=str(tmp_path / "run"))
    assert config.mixed_precision is None
    [(run_dir, _)] = finetune(config)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["mixed_precision"] == "no"


def test_a_run_written_before_its_components_owned_their_options_resumes(tmp_path: Path) -> None:
    """An older config.yaml holds the shorthands as flat keys: --resume reads them as the components' options, takes
    the same options and refuses others by flag."""
    import yaml

    from mtbio.experiments.training_run import check_resume

    run = tmp_path / "run"
    (run / "checkpoints" / "step-00000004").mkdir(parents=True)
    new = build_config({}, {"mixer": "temperature", "temperature": 3.0, "resume": True})
    old = {**new.model_dump(), "mixer": "temperature", "temperature": 3.0, "temperature_cap": None, "main_task": None,
           "aux_ratio": 1.0}
    (run / "config.yaml").write_text(yaml.safe_dump(old))
    check_resume(run, new)
    with pytest.raises(MtbioError, match="--resume: --mixer is .* but .* was trained with"):
        check_resume(run, build_config({}, {"mixer": "temperature", "temperature": 4.0, "resume": True}))
