"""ARCHITECTURE.md's "Where to extend" recipes, each followed in a temporary module (outside the package, as a
plugin would be) and then used the way a task definition or a command uses it; no mtbio module is edited.
(Mixers, optimizers and schedules: tests/test_mixer.py, test_optimizers.py, test_schedules.py.)"""
from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest
import torch

from mtbio.data.loading import read_split
from mtbio.data.readers import READERS
from mtbio.evaluation.metrics import METRICS, score_task
from mtbio.experiments.predictors import PREDICTORS
from mtbio.experiments.reports import REPORT_KINDS, ReportOptions, render_report
from mtbio.model.weighting import WEIGHTINGS, build_weighting
from mtbio.tasks.kinds import TASK_KINDS, kind_names
from mtbio.tasks.loading import load_task_def


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """plugin(name, source): import `source` as a module of its own; what it registers is gone after the test."""
    kind_names()  # the shipped units registered first, so that the copies below hold them
    importlib.import_module("mtbio.model.weightings")
    for registry in (READERS, METRICS, TASK_KINDS, REPORT_KINDS, WEIGHTINGS, PREDICTORS):
        monkeypatch.setattr(registry, "_items", dict(registry._items))
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.import_module(name)
        monkeypatch.delitem(__import__("sys").modules, name)

    return load


def _definition(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "defs" / "x.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def test_a_data_format_a_metric_and_a_task_kind_are_one_module_each(tmp_path: Path, plugin) -> None:
    plugin("plugin_format", '''
        from mtbio.data.example import Example
        from mtbio.data.readers import register

        @register("pipe_lines", columns={})
        def read_pipe_lines(path, task):
            for line, row in enumerate(path.read_text().splitlines(), start=1):
                text, label = row.split("|")
                yield Example(uid=f"r{line}", label=label, text=text, origin=f"{path}:{line}")
    ''')
    plugin("plugin_metric", '''
        from mtbio.evaluation.metrics import register_metric

        @register_metric("share_referred", ("class",))
        def share_referred(gold, pred, task, groups=None):
            return sum(p == "refer" for p in pred) / len(pred)
    ''')
    plugin("plugin_kind", '''
        from mtbio.kinds.classification import Classification
        from mtbio.tasks.kinds import register_kind

        @register_kind
        class Screening(Classification):
            name = "screening"
            default_metric = "share_referred"
    ''')
    assert "screening" in kind_names()
    (tmp_path / "train.txt").write_text("aspirin helps|refer\nplacebo|keep\n")
    task = load_task_def(_definition(tmp_path, """
        name: x
        type: screening
        format: pipe_lines
        files: {train: train.txt}
        labels: [refer, keep]
    """))
    assert task.metric == "share_referred"
    examples = read_split(task, "train", tmp_path)
    assert [(e.text, e.label) for e in examples] == [("aspirin helps", "refer"), ("placebo", "keep")]
    assert score_task(task, ["refer", "keep"], ["refer", "refer"]) == {"share_referred": 1.0}


def test_a_report_a_loss_weighting_and_a_predictor_are_one_registration_each(tmp_path: Path, plugin) -> None:
    plugin("plugin_rest", '''
        import torch
        from mtbio.experiments.predictors import register_predictor
        from mtbio.experiments.reports import register_report
        from mtbio.model.weighting import LossWeighting, register_weighting

        @register_report("mine", lambda paths, options: (paths[0] / "mine.json").is_file())
        def mine(paths, options):
            return [f"mine: {paths[0].name}"]

        @register_weighting("halved")
        class Halved(LossWeighting):
            def forward(self, task, loss):
                return loss / 2

        @register_predictor("constant")
        def constant(job):
            return {"scores": {}}
    ''')
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "mine.json").write_text("{}")
    assert render_report([tmp_path / "study"], ReportOptions()) == ["mine: study"]
    assert float(build_weighting("halved", {}, ["a"])("a", torch.tensor(3.0))) == 1.5
    assert PREDICTORS.get("constant").run(None) == {"scores": {}}
