"""Metadata lives in setup.cfg. This file ships the repository's top-level `task_defs/` inside the
package (as `mtbio/task_defs/`) in wheels and installs, so `pip install .` finds the built-in tasks."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TASK_DEFS = Path(__file__).resolve().parent / "task_defs"


class BuildWithTaskDefs(build_py):
    """build_py, plus task_defs/*.yml copied to mtbio/task_defs/ in the build."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads task_defs/ from the checkout
            return
        target = Path(self.build_lib) / "mtbio" / "task_defs"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(TASK_DEFS.glob("*.yml")):
            shutil.copy2(path, target / path.name)


setup(cmdclass={"build_py": BuildWithTaskDefs})
