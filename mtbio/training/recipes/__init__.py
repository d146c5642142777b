"""Training recipes: option values tuned for an encoder, shipped as YAML files beside this module.

A recipe is a mapping of option names to values (as in a `--config` file) plus `encoders`, the encoder
names it is chosen for, and `families`, the `model_type`s of encoder directories it is chosen for. `--recipe auto`
(the default) picks the recipe that names the run's encoder or its directory's family (the packaged MiniLM gets
`minilm`, a ModernBERT `modernbert`) and `mt-bert` otherwise; `--recipe NAME|FILE` names one. Precedence:
option defaults < recipe < --config file < flags.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError
from mtbio.run_dir import RunDir
from mtbio.training.option_files import read_config_file

HERE = Path(__file__).resolve().parent
AUTO, FALLBACK = "auto", "mt-bert"


def shipped() -> list[str]:
    """Names of the recipes shipped with mtbio."""
    return sorted(p.stem for p in HERE.glob("*.yml"))


def recipe_path(name: str) -> Path:
    """A shipped recipe's file, or `name` itself when it is a YAML file."""
    if (HERE / f"{name}.yml").is_file():
        return HERE / f"{name}.yml"
    path = Path(name)
    if path.suffix in (".yml", ".yaml") and path.is_file():
        return path
    raise MtbioError(f"--recipe {name}: neither a shipped recipe ({', '.join(shipped())}) nor a YAML file")


def _encoder_of(values: dict[str, Any]) -> tuple[str | None, str | None]:
    """The run's encoder name, and the recipe of the run `--from` names (fine-tuning a refined encoder)."""
    source = values.get("from_run")
    if source:
        saved = RunDir(source).config_file
        if saved.is_file():
            config = read_config_file(saved)
            return config.get("encoder"), config.get("recipe")
    return values.get("encoder"), None


def _names_encoder(recipe: dict[str, Any], encoder: str | None) -> bool:
    from mtbio.model.encoder import DEFAULT_ENCODER, default_encoder_path

    named = {str(e) for e in recipe.get("encoders") or []}
    packaged = encoder in (None, "", DEFAULT_ENCODER)
    if not packaged and Path(str(encoder)).is_dir():
        with contextlib.suppress(MtbioError):  # without the packaged encoder installed, this directory is not it
            packaged = Path(str(encoder)).resolve() == Path(default_encoder_path()).resolve()
    if packaged:
        return DEFAULT_ENCODER in named
    return str(encoder) in named or _family(encoder) in {str(f) for f in recipe.get("families") or []}


def _family(encoder: str | None) -> str | None:
    """The `model_type` of an encoder directory's config.json (None for a hub name or an unreadable config)."""
    config = Path(str(encoder)) / "config.json"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return json.loads(config.read_text(encoding="utf-8")).get("model_type")
    return None


def choose(name: str, values: dict[str, Any]) -> str:
    """The recipe `--recipe name` means for a run with these option values (`auto`: by encoder)."""
    if name != AUTO:
        return name
    encoder, inherited = _encoder_of(values)
    if inherited and inherited != AUTO:
        return inherited
    for candidate in shipped():
        if candidate != FALLBACK and _names_encoder(read_config_file(HERE / f"{candidate}.yml"), encoder):
            return candidate
    return FALLBACK


def recipe_values(name: str) -> dict[str, Any]:
    """The option values a recipe sets (its `encoders` list left out)."""
    values = read_config_file(recipe_path(name))
    values.pop("encoders", None)
    values.pop("families", None)
    return values
