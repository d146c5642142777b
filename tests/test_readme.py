"""The README's and the docs pages' shell examples run, in order, so they cannot rot.

Every `mtbio ...` line of every ```bash block of a group of pages (`PAGE_GROUPS`) runs, in order, in the
group's scratch directory, with `../shared/data`
pointing at the real data, `mtbio data get` fetching from a loopback server that serves copies of it
(tests/source_server.py), and training commands shortened (tiny encoder, a few steps, one seed).
Lines that need hardware or a network are skipped here and covered elsewhere: `accelerate launch`
(tests/test_multiprocess.py runs the config-file form), `pip install`/`pytest` (CI runs them),
the `my_tasks/` walk-through (tests/test_user_dataset.py builds such a dataset), and the
benchmarks on real data (tests/test_bench_train.py and tests/test_benchmarks_refine_infer.py run
each script on demo data), and the sweeps on a Ray or SLURM cluster (tests/test_sweep_launchers.py runs both
launchers on this machine: a local Ray instance, submitit's local executor).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from source_server import serve

REPO = Path(__file__).resolve().parents[1]
# pages whose examples build on each other's runs, run in order in one directory; the groups are independent
# (each its own test, so that test workers share them). docs/python_api.md's Python runs in tests/test_docs.py.
PAGE_GROUPS = {"readme": ["README.md", "docs/findings.md", "docs/clusters.md"],
               "reference": ["docs/commands.md", "docs/task_definitions.md", "docs/speed.md", "docs/development.md"]}
PAGES = [page for pages in PAGE_GROUPS.values() for page in pages]
# the commands each group must run (a page that lost its examples fails here)
GROUP_COMMANDS = {"readme": {"data", "refine", "finetune", "export", "evaluate", "report", "pairwise", "stilt", "predict",
                             "tasks", "sweep", "affinity", "select", "merge"},
                  "reference": {"data", "refine", "finetune", "evaluate", "report", "pairwise", "stilt", "affinity",
                                "select", "transfer", "predict", "export", "merge", "tasks", "components"}}
TRAINING = ("refine", "finetune", "pairwise", "stilt", "affinity", "select", "transfer")
SWEEPS = ("pairwise", "stilt", "affinity", "select", "transfer")  # three seeds unless --seeds: one here
QUICK = ["--max-steps", "2", "--max-train-examples", "8", "--max-length", "32", "--batch-size", "4",
         "--max-eval-examples", "48"]  # a fixed dev subset: scoring whole dev sets was most of this test's time


def readme_commands(pages: list[str] = PAGES) -> list[str]:
    """Shell lines of the pages' bash blocks, continuations joined, comments dropped."""
    text = "\n".join((REPO / page).read_text() for page in pages)
    lines: list[str] = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def readme_python(pages: list[str] = PAGES) -> list[str]:
    """The pages' ```python blocks."""
    text = "\n".join((REPO / page).read_text() for page in pages)
    return [textwrap.dedent(block) for block in re.findall(r"```python\n(.*?)```", text, re.S)]


def test_every_docs_page_is_run_by_a_test() -> None:
    """Each docs page is here or in tests/test_docs.py (its Python API page)."""
    pages = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    assert pages == sorted([p for p in PAGES if p.startswith("docs/")] + ["docs/python_api.md"])


def _skip(line: str) -> bool:
    return (line.startswith(("pip ", "python -m pytest", "accelerate ", "python benchmarks/")) or "my_tasks" in line
            or line.startswith("MTBIO_TASK_DEFS=") or "/shared/runs/" in line)


@pytest.mark.parametrize("group", sorted(PAGE_GROUPS))
def test_readme_examples_run(group: str, tmp_path: Path, tiny_encoder_6_layers: str, data_dir: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands run in this process (click's runner: one import of torch instead of one per command);
    the installed `mtbio` entry point is run as a process by the demo test below and tests/test_tasks_cli.py."""
    from click.testing import CliRunner

    from mtbio.cli import main

    tiny_encoder = tiny_encoder_6_layers  # as deep as MiniLM-L6, so the layer options mean what they say
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MTBIO_DATA_DIR=str(data_dir))
    monkeypatch.setenv("MTBIO_DATA_DIR", str(data_dir))
    monkeypatch.chdir(tmp_path)
    ran = []
    for line in readme_commands(PAGE_GROUPS[group]):
        if _skip(line):
            continue
        line = line.replace("../shared/data", str(data_dir)).replace(" task_defs/", f" {REPO / 'task_defs'}/") \
            .replace(" mtbio/sample_data", f" {REPO / 'mtbio' / 'sample_data'}")
        if line.startswith("printf "):
            subprocess.run(line, shell=True, cwd=tmp_path, check=True)
            continue
        words = shlex.split(line)
        assert words[0] == "mtbio", f"README line is not an mtbio command: {line}"
        if words[1] in ("pairwise", "stilt", "affinity") and "--domain" in words:  # 2 tasks instead of 4 keep the sweep short
            i = words.index("--domain")
            words[i:i + 2] = ["--tasks", "chemprot,ddi"]
        if words[1] == "select" and "--candidates" in words:  # the group with every candidate reads and trains
            i = words.index("--candidates") + 1  # them all: three of the domain's candidates keep it short
            words[i] = "chemprot,bc5cdr-chem,bc5cdr-disease" if words[i] == "biomedical" else words[i]
        if words[1] == "transfer" and "--sizes" in words:  # one size ("all" embeds whole training sets for the
            i = words.index("--sizes") + 1  # baselines; tests/test_transfer.py runs "all" and two sizes on tiny data)
            words[i] = words[i].split(",")[0]
        if words[1] in TRAINING:
            words += QUICK + (["--seeds", "1"] if "--seeds" in words or words[1] in SWEEPS else [])
            if "--from" not in words:
                words += ["--encoder", tiny_encoder]
        if words[1] == "evaluate" or words[1:3] == ["tasks", "baselines"]:
            words += ["--max-eval-examples", "48"]
        if words[1:3] == ["tasks", "baselines"]:  # the tiny encoder, as the training commands: fewer texts to embed
            words += ["--max-train-examples", "40", "--encoder", tiny_encoder]
        if words[1:3] == ["data", "get"]:  # from a loopback server holding copies of the real data's files
            with serve(data_dir) as server, monkeypatch.context() as patch:
                patch.setenv("MTBIO_DATA_BASE_URL", server.base_url)
                done = CliRunner().invoke(main, words[1:])
        else:
            done = CliRunner().invoke(main, words[1:])
        assert done.exit_code == 0, f"README command failed: {line}\n{done.output[-3000:]}"
        assert done.exception is None or isinstance(done.exception, SystemExit), (line, done.exception)
        ran.append(words[1])
    for snippet in readme_python(PAGE_GROUPS[group]):  # after the commands, so what they exported is there
        blocked = tmp_path / "no_mtbio"
        blocked.mkdir(exist_ok=True)
        (blocked / "mtbio.py").write_text("raise ImportError('the snippet must not need mtbio')\n")
        uses_mtbio = re.search(r"^import .*\bmtbio\b", snippet, re.M) is not None  # else: it must run without mtbio
        done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True,
                              env=dict(env, MTBIO_CACHE_DIR=str(tmp_path / "cache")) if uses_mtbio
                              else dict(env, PYTHONPATH=str(blocked)))
        assert done.returncode == 0, f"README python block failed:\n{snippet}\n{done.stderr[-3000:]}"
        if "pipeline(" in snippet:  # a list of entities (a few-step tiny model finds any or none)
            assert done.stdout.strip().startswith("["), done.stdout
    assert GROUP_COMMANDS[group] <= set(ran), GROUP_COMMANDS[group] - set(ran)
    if group == "reference":
        assert (tmp_path / "predictions.jsonl").read_text().count("prediction") == 1


def test_quickstart_demo_runs_and_prints_the_table(tmp_path: Path, tiny_encoder: str) -> None:
    """`mtbio demo` (the quickstart's main job), with the tiny encoder so it stays quick here."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([str(Path(sys.executable).parent / "mtbio"), "demo", "--encoder", tiny_encoder, "--epochs", "1",
                           "--output", str(tmp_path / "demo")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    header = next(line for line in done.stdout.splitlines() if line.startswith("run "))
    for task in ("demo-hoc", "demo-ner", "demo-nli", "demo-relation", "demo-sts", "avg", "blurb"):
        assert task in header
    rows = [line for line in done.stdout.splitlines() if line.startswith(str(tmp_path))]
    assert [r.split()[1] for r in rows] == ["refinement", "fine-tune"]
    trivial = next(line for line in done.stdout.splitlines() if line.startswith("trivial")).split()
    columns = header.split()
    assert trivial[columns.index("demo-ner")] == "0.0000"  # all O: no entity found
    floor = next(line for line in done.stdout.splitlines() if line.startswith("no training (best baseline)"))
    assert len(floor.split()) == len(columns) + 3  # the row's name is three words; every task has a baseline
