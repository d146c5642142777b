"""Reading a YAML file of option values: a `--config` file, a recipe, a run's config.yaml."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mtbio.errors import MtbioError


def read_config_file(path: Path | str) -> dict[str, Any]:
    """A YAML file of flag values (keys with dashes or underscores), keyed by option name."""
    from mtbio.tasks.loading import read_yaml

    data = read_yaml(Path(path)) or {}
    if not isinstance(data, dict):
        raise MtbioError(f"{path}: a config file is a mapping of option names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}
