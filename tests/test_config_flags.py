"""Every run option is a flag, every flag is a RunConfig field, and every field is read by the code (no dead flags)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtbio.cli import TRAINING_OPTIONS
from mtbio.errors import MtbioError
from mtbio.training.config import RunConfig, build_config

PACKAGE = Path(__file__).resolve().parents[1] / "mtbio"
# Fields set by a command's own options rather than the shared training options.
COMMAND_OWN = {"from_run", "intermediate", "target"}


def _flag_fields() -> set[str]:
    names = set()
    for option in TRAINING_OPTIONS:
        param = option(lambda: None).__click_params__[0]
        names.add("config_file" if param.name == "config_file" else param.name)
    return names - {"config_file"}


def test_every_training_flag_is_a_config_field_and_back() -> None:
    fields = set(RunConfig.model_fields)
    assert _flag_fields() <= fields
    assert fields - _flag_fields() <= COMMAND_OWN | {"seeds", "dry_run", "alpha", "min_delta"}


def test_every_config_field_is_read_outside_its_definition() -> None:
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "config.py")
    unused = [f for f in RunConfig.model_fields if not re.search(rf"\.{f}\b|\"{f}\"|'{f}'|\b{f}=", code)]
    assert unused == []


def test_unknown_config_key_is_an_error_naming_it() -> None:
    with pytest.raises(MtbioError, match="'batch_sise': unknown option"):
        build_config({"batch_sise": 8}, {}, source="run.yml")
