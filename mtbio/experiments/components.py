"""Every registry of named components in one place: `mtbio components` lists their names (the shipped ones and a
plugin's), and the docs' generated lists (`<!-- generated: kinds -->…<!-- /generated -->`) are filled from them."""
from __future__ import annotations

import importlib
import re

from mtbio.errors import MtbioError
from mtbio.registry import Registry

# what a docs page or `mtbio components` calls a registry → the module that registers the shipped ones, its registry
REGISTRIES: dict[str, tuple[str, str]] = {
    "kinds": ("mtbio.kinds", "mtbio.tasks.kinds:TASK_KINDS"),
    "formats": ("mtbio.data.readers", "mtbio.data.readers:READERS"),
    "metrics": ("mtbio.kinds", "mtbio.evaluation.metrics:METRICS"),  # a kind may register its own metrics
    "optimizers": ("mtbio.training.optimizers", "mtbio.training.optimizers:OPTIMIZERS"),
    "schedules": ("mtbio.training.schedules", "mtbio.training.schedules:SCHEDULES"),
    "mixers": ("mtbio.data.mixers", "mtbio.data.mixers:MIXERS"),
    "weightings": ("mtbio.model.weightings", "mtbio.model.weightings:WEIGHTINGS"),
    "adapters": ("mtbio.model.adapters", "mtbio.model.adapters:ADAPTERS"),
    "predictors": ("mtbio.experiments.predictors", "mtbio.experiments.predictors:PREDICTORS"),
    "reports": ("mtbio.experiments.reports", "mtbio.experiments.reports:REPORT_KINDS"),
    "rules": ("mtbio.reporting.verdicts", "mtbio.reporting.verdicts:RULES"),
}
GENERATED = re.compile(r"(<!-- generated: (?P<name>[a-z_]+) -->)(?P<body>.*?)(<!-- /generated -->)", re.DOTALL)


def registry(name: str) -> Registry:
    """The registry `name` (a key of REGISTRIES), with the shipped components registered."""
    if name not in REGISTRIES:
        raise MtbioError(f"unknown component registry '{name}' (known: {', '.join(REGISTRIES)})")
    shipped, where = REGISTRIES[name]
    importlib.import_module(shipped)
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)


def component_names(name: str) -> list[str]:
    """The registered names of one registry, sorted."""
    return registry(name).names()


def components_text(names: list[str] | None = None) -> str:
    """`mtbio components`: one line per registry, `kinds: a, b, …` (all registries when `names` is empty)."""
    return "\n".join(f"{name}: {', '.join(component_names(name))}" for name in names or REGISTRIES)


def fill_generated(text: str) -> str:
    """`text` with each generated block's body replaced by its registry's names, in backticks, comma-separated."""
    return GENERATED.sub(lambda m: m.group(1) + ", ".join(f"`{n}`" for n in component_names(m.group("name")))
                         + m.group(4), text)
