"""A small name → implementation registry (readers, heads, metrics, samplers).

    READERS = Registry("reader")

    @READERS.register("conll")
    def read_conll(...): ...

    READERS.get("conll")  # clear error for an unknown name, listing the known ones
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from importlib.metadata import entry_points
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from mtbio.errors import MtbioError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to implementations; refuses duplicates and explains unknown names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = item
            return item

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise MtbioError(f"unknown {self.kind} '{name}' (known: {known})") from None

    def unregister(self, name: str) -> None:
        """Remove `name` (a plugin's or a test's registration); unknown names are ignored."""
        self._items.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        return sorted(self._items)

    def in_order(self) -> list[T]:
        """The registered items in the order they were registered."""
        return list(self._items.values())


M = TypeVar("M", bound=BaseModel)


def validate_options(model: type[M], values: Mapping[str, Any], owner: str) -> M:
    """A component's options model filled from `values`; ValueError naming `owner` (`mixer 'annealed'`) and
    each option that does not fit."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        kind = owner.split(" ", 1)[0]
        problems = [f"{'.'.join(map(str, e['loc']))}: "
                    f"{f'not an option of this {kind}' if e['type'] == 'extra_forbidden' else e['msg']}"
                    for e in exc.errors()]
        raise ValueError(f"{owner}: {'; '.join(problems)}") from None


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of a package (its `__name__`, `__path__`), so that each registers what it holds: a new
    reader, kind, mixer, weighting, optimizer or schedule is one module in its package."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")


PLUGIN_GROUP = "mtbio.plugins"  # the entry-point group an installed plugin package declares
PLUGINS_ENV = "MTBIO_PLUGINS"  # comma-separated module names to import as plugins


def load_plugins(include: Sequence[str] = ()) -> list[str]:
    """Import every plugin, so that what it registers (kinds, readers, metrics, optimizers, schedules, mixers,
    weightings, reports, predictors, studies) is seen by every command: the modules of installed packages' `mtbio.plugins`
    entry points, then those named in $MTBIO_PLUGINS and in `include` (`--include-package`; importable from the
    working directory too). `include` joins $MTBIO_PLUGINS, so the processes a command starts (a sweep's cells)
    load the same plugins. Returns the modules imported; a module that cannot be imported is one MtbioError."""
    named = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    named += [n for n in include if n not in named]
    if include:
        os.environ[PLUGINS_ENV] = ",".join(named)
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
    loaded = []
    for point in entry_points(group=PLUGIN_GROUP):
        try:
            point.load()
        except Exception as exc:  # a broken plugin names itself, not a traceback from deep inside it
            raise MtbioError(f"plugin '{point.name}' ({point.value}, entry point {PLUGIN_GROUP}) failed to load: "
                             f"{type(exc).__name__}: {exc}") from exc
        loaded.append(point.value)
    for name in named:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise MtbioError(f"plugin module '{name}' (--include-package / ${PLUGINS_ENV}) failed to import: "
                             f"{type(exc).__name__}: {exc}") from exc
        loaded.append(name)
    return loaded
