"""The counters of a training run (`TrainerState`): kept by the run controller
(`mtbio.training.trainer`), advanced by the step engine (`mtbio.training.step_engine`), saved as
JSON with every checkpoint."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainerState:
    """Counters saved with every checkpoint (JSON)."""

    global_step: int = 0
    epoch: int = 0
    best_score: float = -math.inf
    best_step: int = -1
    best_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    mixer: dict[str, Any] = field(default_factory=dict)
    listeners: dict[str, Any] = field(default_factory=dict)  # listeners' own state (`Listener.state_dict`) by name
    examples_seen: int = 0
    tokens_seen: int = 0
    token_squares_seen: int = 0  # the sum of the trained sequences' lengths squared (attention's FLOPs)
    train_seconds: float = 0.0
    eval_seconds: float = 0.0  # dev (and test) scoring
    eval_tokens: int = 0
    eval_token_squares: int = 0
    save_seconds: float = 0.0  # checkpoints and best-weights saves
    # examples_seen and train_seconds once the warm-up steps were done (steady-state throughput)
    warm: dict[str, float] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # batches skipped by --skip-nonfinite
    evals_since_best: int = 0  # dev evaluations without improvement (--patience)
    last_eval_step: int = -1  # the step of the last dev evaluation (a resumed run does not redo it)
    stopped_early: bool = False
