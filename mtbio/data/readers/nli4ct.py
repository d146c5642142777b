"""`nli4ct`: SemEval-2023 Task 7 statements with premises assembled from the trial reports.

The split file is a JSON object keyed by example id with Type (Single/Comparison), Section_id,
Primary_id, Secondary_id (Comparison only), Statement and Label. The premise is the section
named by Section_id in `<ct_dir>/<NCT id>.json` (a list of lines, joined with spaces). For a
Comparison the two trials are delimited explicitly, matching how statements refer to them:

    Primary trial: <section of the primary trial> Secondary trial: <section of the secondary trial>

A Single example's premise is `Primary trial: <section>`. text = Statement, text_b = premise,
group = the primary trial id.

reader_options:
  ct_dir: str   folder of trial reports, relative to the split file's folder (default CT_json)
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import KeyLines, load_json, origin, read_text, require_fields
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

FIELDS = ("Type", "Section_id", "Primary_id", "Statement", "Label")
SECTIONS = ("Intervention", "Eligibility", "Results", "Adverse Events")


@register("nli4ct", options={"ct_dir": str}, pairs=True)
def read_nli4ct(path: Path, task: TaskDef) -> Iterator[Example]:
    """One statement per example id."""
    text = read_text(path)
    data = load_json(path, text)
    if not isinstance(data, dict):
        raise DataFormatError(path, 1, "expected a JSON object keyed by example id")
    ct_dir = path.parent / task.reader_options.get("ct_dir", "CT_json")
    reports = _Reports(ct_dir)
    lines = KeyLines(text)
    for uid, entry in data.items():
        line = lines.line_of(uid)
        where = f"example {uid}"
        require_fields(entry, FIELDS, path, line, where, strings=FIELDS)
        section = entry["Section_id"]
        if section not in SECTIONS:
            raise DataFormatError(path, line, f"{where}: unknown Section_id '{section}' (known: {', '.join(SECTIONS)})")
        premise = "Primary trial: " + reports.section(entry["Primary_id"], section, path, line)
        if entry["Type"] == "Comparison":
            require_fields(entry, ("Secondary_id",), path, line, where, strings=("Secondary_id",))
            premise += " Secondary trial: " + reports.section(entry["Secondary_id"], section, path, line)
        elif entry["Type"] != "Single":
            raise DataFormatError(path, line, f"{where}: Type must be Single or Comparison, got '{entry['Type']}'")
        yield Example(
            uid=uid,
            label=entry["Label"],
            text=entry["Statement"],
            text_b=premise,
            group=entry["Primary_id"],
            origin=origin(path, line),
            meta={"type": entry["Type"], "section": section},
        )


class _Reports:
    """Trial reports loaded once each."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._cache: dict[str, dict[str, object]] = {}

    def section(self, trial: str, section: str, path: Path, line: int | None) -> str:
        if trial not in self._cache:
            report_path = self.directory / f"{trial}.json"
            if not report_path.is_file():
                raise DataFormatError(path, line, f"trial report {report_path} not found")
            report = load_json(report_path)
            if not isinstance(report, dict):
                raise DataFormatError(report_path, 1, "expected a JSON object")
            self._cache[trial] = report
        sentences = self._cache[trial].get(section)
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise DataFormatError(self.directory / f"{trial}.json", None, f"section '{section}' missing or not a list of strings")
        return " ".join(" ".join(s.split()) for s in sentences if s.strip())
