"""Plugins reach the command line: a module outside the package registers a task kind, a data format and an
optimizer, and `mtbio tasks list` and `mtbio finetune` use them in a fresh process, through each of the three routes
(`--include-package`, $MTBIO_PLUGINS, an installed package's `mtbio.plugins` entry point)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = '''
import torch

from mtbio.data.example import Example
from mtbio.data.readers import register
from mtbio.kinds.classification import Classification
from mtbio.tasks.kinds import register_kind
from mtbio.training.optimizers import register_optimizer


@register("pipe_lines", columns={})
def read_pipe_lines(path, task):
    for line, row in enumerate(path.read_text().splitlines(), start=1):
        text, label = row.split("|")
        yield Example(uid=f"{path.stem}{line}", label=label, text=text, origin=f"{path}:{line}")


@register_kind
class Screening(Classification):
    name = "screening"


@register_optimizer("plugin_sgd")
def plugin_sgd(groups, lr):
    return torch.optim.SGD(groups, lr=lr)
'''


@pytest.fixture
def plugin_project(tmp_path: Path) -> Path:
    (tmp_path / "screening_plugin.py").write_text(PLUGIN)
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "screen.yml").write_text(textwrap.dedent("""
        name: screen
        type: screening
        format: pipe_lines
        files: {train: screen/train.txt, dev: screen/dev.txt}
        labels: [refer, keep]
        max_length: 16
    """))
    (tmp_path / "data" / "screen").mkdir(parents=True)
    rows = ["aspirin helps|refer", "placebo only|keep", "refer to clinic|refer", "keep watching|keep"] * 4
    (tmp_path / "data" / "screen" / "train.txt").write_text("\n".join(rows) + "\n")
    (tmp_path / "data" / "screen" / "dev.txt").write_text("\n".join(rows[:6]) + "\n")
    return tmp_path


def _mtbio(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    if "MTBIO_PLUGINS" not in (env or {}):
        full.pop("MTBIO_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "mtbio", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=300)


def test_without_the_plugin_the_kind_is_unknown(plugin_project: Path) -> None:
    found = _mtbio(["tasks", "list", "--task-defs", "defs", "--data-dir", "data"], plugin_project)
    assert "screening" in found.stdout + found.stderr and "unknown" in (found.stdout + found.stderr).lower()


def test_include_package_reaches_tasks_list(plugin_project: Path) -> None:
    found = _mtbio(["--include-package", "screening_plugin", "tasks", "list", "--task-defs", "defs",
                    "--data-dir", "data"], plugin_project)
    assert found.returncode == 0, found.stderr
    row = next(line for line in found.stdout.splitlines() if line.startswith("screen "))
    assert row.split()[:2] == ["screen", "screening"] and "16" in row.split() and "6" in row.split()


def test_environment_route_reaches_finetune_with_the_plugins_optimizer(plugin_project: Path,
                                                                       tiny_encoder: str) -> None:
    found = _mtbio(["finetune", "--task", "screen", "--task-defs", "defs", "--data-dir", "data", "--encoder",
                    tiny_encoder, "--optimizer", "plugin_sgd", "--max-steps", "2", "--no-baselines",
                    "--output", "out"], plugin_project,
                   env={"MTBIO_PLUGINS": "screening_plugin", "PYTHONPATH": str(plugin_project)})
    assert found.returncode == 0, found.stderr[-2000:]
    results = json.loads((plugin_project / "out" / "screen" / "results.json").read_text())
    assert results["steps"] == 2 and "accuracy" in results["dev"]["screen"]
    assert "plugin_sgd" in (plugin_project / "out" / "screen" / "config.yaml").read_text()


def test_an_installed_entry_point_is_loaded(plugin_project: Path) -> None:
    dist = plugin_project / "site" / "screening_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: screening-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mtbio.plugins]\nscreening = screening_plugin\n")
    (plugin_project / "screening_plugin.py").rename(plugin_project / "site" / "screening_plugin.py")
    found = _mtbio(["tasks", "list", "--task-defs", "defs", "--data-dir", "data"], plugin_project,
                   env={"PYTHONPATH": str(plugin_project / "site")})
    assert found.returncode == 0, found.stderr
    assert any(line.startswith("screen ") and "screening" in line for line in found.stdout.splitlines())


def test_a_broken_plugin_is_one_line(plugin_project: Path) -> None:
    found = _mtbio(["--include-package", "no_such_plugin_module", "tasks", "list"], plugin_project)
    assert found.returncode == 2
    assert found.stderr.strip().splitlines()[-1].startswith("error: plugin module 'no_such_plugin_module'")
