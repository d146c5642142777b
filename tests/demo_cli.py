"""What the fault tests share: the options of a short run on the packaged demo data, and `mtbio` invoked in-process
with click's runner (succeeding, or refusing with one `error:` line)."""
from __future__ import annotations

from click.testing import CliRunner, Result

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR

SAMPLE_DEFS = str(SAMPLE_DIR / "task_defs")
DATA = ["--task-defs", SAMPLE_DEFS, "--data-dir", str(SAMPLE_DIR), "--batch-size", "8", "--max-train-examples", "32",
        "--max-length", "48", "--seed", "7"]


def cli(*args: object) -> Result:
    """`mtbio ARGS`, each argument as a string."""
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args: object) -> Result:
    """`mtbio ARGS`, which must succeed."""
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result


def one_error_line(result: Result) -> str:
    """The one `error:` line of a refusal (exit code 2, no traceback)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error:")]
    return line
