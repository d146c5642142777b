"""The training loop's events: a listener decides evaluations, checkpoints and early stops through the flow."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtbio.experiments.training_run import train_tasks
from mtbio.tasks.loading import load_catalog
from mtbio.training.config import RunConfig
from mtbio.training.events import Flow, Listener


class Scripted(Listener):
    """Evaluates at step 3, checkpoints at step 4, stops after the evaluation of step 6; records every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_step_end(self, trainer: Any, flow: Flow) -> None:
        step = trainer.state.global_step
        self.events.append(("step", step))
        flow.evaluate |= step in (3, 6)
        flow.save |= step == 4

    def on_evaluate(self, trainer: Any, scores: dict, improved: bool, flow: Flow) -> None:
        self.events.append(("evaluate", trainer.state.global_step))
        flow.stop |= trainer.state.global_step == 6

    def on_save(self, trainer: Any, flow: Flow) -> None:
        self.events.append(("save", trainer.state.global_step))

    def on_train_end(self, trainer: Any) -> None:
        self.events.append(("end", trainer.state.global_step))


def test_a_listener_drives_evaluation_checkpoints_and_an_early_stop(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    config = RunConfig(tasks=["kw-all"], task_defs=[defs], data_dir=data, encoder=micro_encoder, output=str(tmp_path),
                       max_steps=20, eval_every=1000, batch_size=16, lr=1e-2, seed=3, mixed_precision="no")
    listener = Scripted()
    results = train_tasks([load_catalog([defs]).tasks["kw-all"]], config, tmp_path / "run", micro_encoder, 1e-2,
                             "single-task", Path(data), listeners=[listener])
    assert results["steps"] == 6  # stopped early, at the listener's request
    assert [e for e in listener.events if e[0] != "step"] == [("evaluate", 3), ("save", 4), ("evaluate", 6),
                                                              ("save", 6), ("end", 6)]
    dev = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
           if json.loads(line)["split"] == "dev"]
    assert dev == [3, 6]  # the run's own end-of-training evaluation is not repeated at step 6
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step-00000004", "step-00000006"]
