"""A new pooling is one file: a module that registers it (here outside the package, through --include-package) is a
choice of --pooling and of a task definition's `pooling`, and the heads of a run read it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.tasks.loading import TaskDefinitionErrors, load_task_def

MAX_POOLING = '''
import os
from pathlib import Path

from mtbio.model.poolings import register_pooling


@register_pooling("max", needs_mask=True)
def max_pooling(hidden, mask, pooled):
    Path(os.environ["POOLED_MARK"]).touch()  # the run's heads read this function
    return hidden.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(1).values
'''


def test_a_pooling_registered_in_one_file_is_what_the_runs_heads_read(tmp_path: Path, tiny_encoder: str) -> None:
    (tmp_path / "max_pooling.py").write_text(MAX_POOLING)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(repo)]), OMP_NUM_THREADS="1",
               POOLED_MARK=str(tmp_path / "pooled"))
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "mtbio", "--include-package", "max_pooling", "finetune", "--task",
                             "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR),
                             "--encoder", tiny_encoder, "--pooling", "max", "--max-steps", "1", "--batch-size", "4",
                             "--max-train-examples", "8", "--max-eval-examples", "8", "--no-baselines", "--output",
                             str(run)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    [head_config] = run.rglob("head_config.json")
    assert json.loads(head_config.read_text())["pooling"] == "max" and (tmp_path / "pooled").is_file()
    refused = subprocess.run([sys.executable, "-m", "mtbio", "finetune", "--task", "demo-nli", "--pooling", "max"],
                             env=env, capture_output=True, text=True)  # without the plugin: not a choice
    assert refused.returncode != 0 and "'max' is not one of 'task', 'auto', 'cls', 'mean', 'pooler'" in refused.stderr


def test_a_task_definition_names_a_registered_pooling(tmp_path: Path) -> None:
    definition = (SAMPLE_DIR / "task_defs" / "demo-nli.yml").read_text()
    (tmp_path / "demo-nli.yml").write_text(definition + "\npooling: nope\n")
    with pytest.raises(TaskDefinitionErrors, match="unknown pooling 'nope' \\(registered: cls, mean, pooler\\)"):
        load_task_def(tmp_path / "demo-nli.yml")
