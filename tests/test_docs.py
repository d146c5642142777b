"""The Python API page runs as written, so it cannot rot: its ```python blocks execute in one scratch
directory against the real data, with every stage function shortened (tiny encoder, a few steps), as
tests/test_readme.py does for the commands of the README and the other docs pages."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mtbio

DOCS = Path(__file__).resolve().parents[1] / "docs"
API_PAGES = ["python_api.md"]
QUICK = dict(max_steps=2, max_length=32, batch_size=4)


def _blocks(page: Path) -> str:
    return "\n".join(textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S))


@pytest.mark.parametrize("page", API_PAGES)
def test_docs_python_runs(page: str, tmp_path: Path, tiny_encoder: str, data_dir: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    shorten = mtbio._config

    def quick(options: dict[str, Any], study: bool = False) -> Any:
        options.update(QUICK)
        if not options.get("from_run"):
            options["encoder"] = tiny_encoder
        return shorten(options, study)

    monkeypatch.setattr(mtbio, "_config", quick)
    monkeypatch.chdir(tmp_path)
    code = _blocks(DOCS / page).replace('"../shared/data"', repr(str(data_dir)))
    exec(compile(code, str(DOCS / page), "exec"), {"__name__": "__docs__"})
