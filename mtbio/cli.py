"""The `mtbio` command line: parse options, call one library function, print the result.

No logic lives here beyond option parsing and printing; every command calls into the layers
below (tasks → data → model → training → experiments). User-fixable problems (MtbioError) are
printed as one line without a traceback and exit with status 2.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import click

from mtbio.errors import MtbioError

# Reading local files must never wait on the network: datasets' download counter is switched off.
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


class _Group(click.Group):
    """Turns MtbioError into one clear line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MtbioError as exc:
            for line in str(exc).splitlines():
                click.echo(f"error: {line}", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(package_name="mtbio")
def main() -> None:
    """Multi-task learning on biomedical and clinical text."""


# ---- mtbio tasks ... (task definitions and data) ---------------------------------------------
@main.group()
def tasks() -> None:
    """Inspect and validate task definitions and their data."""


# ---- training stages --------------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    main()
