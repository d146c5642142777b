"""mtbio: multi-task learning on biomedical and clinical text.

Layers, in the order data flows through them:
task definitions (`mtbio.tasks`) → readers and featurization (`mtbio.data`) →
shared encoder and heads (`mtbio.model`) → training loop (`mtbio.training`) →
metrics (`mtbio.evaluation`) → stages and sweeps (`mtbio.experiments`) → CLI.
"""
from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mtbio.experiments.predict import LoadedRun


def load(run_dir: Any) -> "LoadedRun":
    """Load a run directory (encoder + heads) for prediction. Never unpickles."""
    from mtbio.experiments.predict import load_run

    return load_run(run_dir)
