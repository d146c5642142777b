"""Every run option is a flag, every flag is a RunConfig field, and every field is read by the code (no dead flags)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio import cli
from mtbio.errors import MtbioError
from mtbio.training.config import RunConfig, build_config

PACKAGE = Path(__file__).resolve().parents[1] / "mtbio"
COMMANDS = ("refine", "finetune", "pairwise", "stilt")


def _command_fields(name: str) -> set[str]:
    return {p.name for p in cli.main.commands[name].params} - {"config_file", "task"}


def test_every_field_is_a_flag_with_help_and_every_flag_a_field() -> None:
    """Options come from RunConfig alone: each field is an option of some training command, with help."""
    fields = set(RunConfig.model_fields)
    flags = set().union(*(_command_fields(c) for c in COMMANDS))
    assert flags == fields
    assert all(RunConfig.model_fields[f].description for f in fields)
    assert {"alpha", "min_delta", "dry_run", "seeds"} <= _command_fields("pairwise")
    assert {"intermediate", "target"} <= _command_fields("stilt") and "from_run" in _command_fields("finetune")
    assert "from_run" not in _command_fields("refine") and "seeds" not in _command_fields("refine")


def test_help_shows_every_default() -> None:
    for command in COMMANDS:
        for param in cli.main.commands[command].params:
            field = RunConfig.model_fields.get(param.name)
            if field is not None and (field.get_default(call_default_factory=True) not in (None, []) or (field.json_schema_extra or {}).get("shown")):
                assert "[default: " in param.help, (command, param.name)
    text = " ".join(CliRunner().invoke(cli.main, ["refine", "--help"]).output.split())
    assert "Global batch size (examples per optimizer step). [default: 32]" in text
    assert "--packing / --no-packing" in text and "[default: on]" in text


def test_every_config_field_is_read_outside_its_definition() -> None:
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "config.py")
    unused = [f for f in RunConfig.model_fields if not re.search(rf"\.{f}\b|\"{f}\"|'{f}'|\b{f}=", code)]
    assert unused == []


def test_unknown_config_key_is_an_error_naming_it() -> None:
    with pytest.raises(MtbioError, match="'batch_sise': unknown option"):
        build_config({"batch_sise": 8}, {}, source="run.yml")
