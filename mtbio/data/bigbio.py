"""Interim: replaced by the BigBio schema conversions (issue 35, item 2)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mtbio.data.example import Example
from mtbio.errors import MtbioError
from mtbio.tasks.schema import TaskDef

SCHEMAS: tuple[str, ...] = ()
SCHEMA_OPTIONS: dict[str, type | tuple[type, ...]] = {}


def check_schema_options(options: dict[str, Any]) -> list[tuple[str, str]]:
    return []


def examples_from_schema(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef,
                         source: str) -> Iterator[Example]:
    raise MtbioError("BigBio schemas are not available yet")
