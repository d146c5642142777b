"""ARCHITECTURE.md's "Where to extend" recipes, each followed in a module of its own outside the package (a data
format, a metric, a task kind, an optimizer, a schedule, a mixer, a loss weighting, a transfer predictor, a report)
and reached as a plugin is, through `--include-package` or $MTBIO_PLUGINS: `mtbio tasks list`, `refine`,
`affinity`, `report` and `components` use them in a fresh process, and no mtbio module is edited."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RECIPES = {
    "recipe_format": '''
        from mtbio.data.example import Example
        from mtbio.data.readers import register

        @register("pipe_lines", columns={})
        def read_pipe_lines(path, task):
            for line, row in enumerate(path.read_text().splitlines(), start=1):
                text, label = row.split("|")
                yield Example(uid=f"{path.stem}{line}", label=label, text=text, origin=f"{path}:{line}")
    ''',
    "recipe_metric": '''
        from mtbio.evaluation.metrics import register_metric

        @register_metric("share_referred", ("class",))
        def share_referred(gold, pred, task, groups=None):
            return sum(p == "refer" for p in pred) / len(pred)
    ''',
    "recipe_kind": '''
        from mtbio.kinds.classification import Classification
        from mtbio.tasks.kinds import register_kind

        @register_kind
        class Screening(Classification):
            name = "screening"
            default_metric = "share_referred"
    ''',
    "recipe_optimizer": '''
        import torch
        from mtbio.training.optimizers import OptimizerOptions, register_optimizer

        class SgdOptions(OptimizerOptions):
            momentum: float = 0.0

        @register_optimizer("plain_sgd", options=SgdOptions)
        def plain_sgd(groups, lr, momentum=0.0):
            return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    ''',
    "recipe_schedule": '''
        from mtbio.training.schedules import register_schedule

        @register_schedule("halfway")
        def halfway(step, warmup, total):
            return 0.5
    ''',
    "recipe_mixer": '''
        from mtbio.data.mixers import MixerOptions, register_mixer

        class FirstOptions(MixerOptions):
            passes: int = 1

        @register_mixer("first_only", options=FirstOptions, shuffle_plan=False)
        def first_only(sampler, epoch):
            task = sampler.tasks[0]
            return [(task, b) for cycle in range(sampler.options.passes) for b in sampler.task_pass(task, epoch, cycle)]
    ''',
    "recipe_weighting": '''
        from mtbio.model.weighting import LossWeighting, register_weighting

        @register_weighting("halved")
        class Halved(LossWeighting):
            def forward(self, task, loss):
                return loss / 2
    ''',
    "recipe_predictor": '''
        from mtbio.data.loading import read_split
        from mtbio.experiments.predictors import register_predictor
        from mtbio.reporting.affinity import build_scores

        @register_predictor("more_words")
        def more_words(job):
            words = {t.name: sum(len(e.text.split()) for e in read_split(t, "train", job.data_dir)) for t in job.tasks}
            scores = {s: {t: float(words[s] - words[t]) for t in words if t != s} for s in words}
            return build_scores("more_words", "source's training words minus the target's", False,
                                {t.name: t.metric for t in job.tasks}, {job.config.seed: scores},
                                job.config.rule_spec()[1].alpha, {}, {"words": words})
    ''',
    "recipe_report": '''
        from mtbio.experiments.reports import register_report

        @register_report("notes", lambda paths, options: (paths[0] / "notes.txt").is_file())
        def notes(paths, options):
            return [f"notes of {paths[0].name}: {(paths[0] / 'notes.txt').read_text().strip()}"]
    ''',
}
# each recipe of ARCHITECTURE.md's "Where to extend" → the module here that follows it, or why a plugin has none
FOLLOWED = {"A data format": "recipe_format", "A metric": "recipe_metric", "A task kind": "recipe_kind",
            "A kind of report": "recipe_report", "Add a mixer": "recipe_mixer",
            "Add a loss weighting": "recipe_weighting", "Add an optimizer": "recipe_optimizer",
            "Add a schedule": "recipe_schedule", "Add a transfer predictor": "recipe_predictor"}
NOT_REGISTERED = {
    "Something that watches or steers training": "a listener is passed to train_tasks from Python",
    "An encoder family whose `AutoModelFor*` classes add layers before the classifier": "tests/test_modernbert.py",
    "A study, a mini-batch mixer, a loss weighting, an optimizer, a schedule, a transfer predictor, a pooling, a run option":
        "the index of the sections below",
    "A kind of study": "followed through the plugin route by tests/test_study_plugin.py",
    "Add a study": "followed through the plugin route by tests/test_study_plugin.py",
    "Add a pooling": "followed through the plugin route by tests/test_poolings.py",
    "Add a run option": "a field of RunConfig, not a plugin's",
}
ARCHITECTURE = Path(__file__).resolve().parents[1] / "ARCHITECTURE.md"
TRAINING = ["recipe_format", "recipe_metric", "recipe_kind", "recipe_optimizer", "recipe_schedule", "recipe_mixer",
            "recipe_weighting"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory holding the recipe modules and two tasks of the plugin's kind and format."""
    for name, source in RECIPES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    rows = ["aspirin helps|refer", "placebo only|keep", "refer to clinic|refer", "keep watching|keep"] * 4
    for task, extra in (("first", []), ("second", ["aspirin and placebo together|refer"])):
        (tmp_path / "defs").mkdir(exist_ok=True)
        (tmp_path / "defs" / f"{task}.yml").write_text(textwrap.dedent(f"""
            name: {task}
            type: screening
            format: pipe_lines
            files: {{train: {task}/train.txt, dev: {task}/dev.txt}}
            labels: [refer, keep]
            max_length: 16
        """))
        (tmp_path / "data" / task).mkdir(parents=True)
        (tmp_path / "data" / task / "train.txt").write_text("\n".join(rows + extra) + "\n")
        (tmp_path / "data" / task / "dev.txt").write_text("\n".join(rows[:6]) + "\n")
    return tmp_path


def test_every_recipe_of_architecture_md_is_followed_here() -> None:
    """A recipe added to "Where to extend" needs a plugin module in RECIPES (or a reason in NOT_REGISTERED)."""
    section = ARCHITECTURE.read_text().split("## Where to extend", 1)[1]
    recipes = re.findall(r"^- \*\*(.+?)\*\*", section, re.M) + re.findall(r"^## (Add an? .+)$", section, re.M)
    assert sorted(recipes) == sorted([*FOLLOWED, *NOT_REGISTERED])
    assert set(FOLLOWED.values()) == set(RECIPES)


def _mtbio(args: list[str], cwd: Path, plugins: list[str] | None = None) -> subprocess.CompletedProcess:
    """`mtbio ARGS` in a fresh process, with `plugins` in $MTBIO_PLUGINS (importable from `cwd`)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(cwd), os.environ.get(
        "PYTHONPATH", "")])}
    env.pop("MTBIO_PLUGINS", None)
    if plugins:
        env["MTBIO_PLUGINS"] = ",".join(plugins)
    done = subprocess.run([sys.executable, "-m", "mtbio", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_format_a_kind_and_a_metric_reach_tasks_list_and_components(project: Path) -> None:
    include = [a for name in ("recipe_format", "recipe_metric", "recipe_kind") for a in ("--include-package", name)]
    listed = _mtbio([*include, "tasks", "list", "--task-defs", "defs", "--data-dir", "data"], project).stdout
    rows = [line.split() for line in listed.splitlines() if line.startswith(("first ", "second "))]
    assert [row[:2] for row in rows] == [["first", "screening"], ["second", "screening"]]
    assert "17" in rows[1] and "6" in rows[1]  # the plugin's format read both splits
    lines = _mtbio([*include, "components", "kinds", "formats", "metrics"], project).stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["kinds", "formats", "metrics"]
    assert "screening" in lines[0] and "pipe_lines" in lines[1] and "share_referred" in lines[2]


def test_the_training_recipes_are_used_by_a_refine_run(project: Path, tiny_encoder: str) -> None:
    """Kind, format, metric, optimizer (with an option), schedule, mixer and loss weighting in one two-task run."""
    _mtbio(["refine", "--tasks", "first,second", "--task-defs", "defs", "--data-dir", "data", "--encoder",
            tiny_encoder, "--optimizer", "{name: plain_sgd, momentum: 0.5}", "--schedule", "halfway", "--mixer",
            "{name: first_only, passes: 1}", "--weighting", "halved", "--max-steps", "3", "--lr", "1e-3",
            "--no-baselines", "--output", "run"], project, plugins=TRAINING)
    results = json.loads((project / "run" / "results.json").read_text())
    assert results["steps"] == 3 and set(results["dev"]) == {"first", "second"}
    assert all(set(scores) == {"share_referred"} for scores in results["dev"].values())  # the kind's own metric
    train = [json.loads(line) for line in (project / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["split"] == "train"]
    assert train and all(set(r["loss"]) == {"first"} for r in train)  # the mixer drew the first task alone
    assert all(r["lr"] == pytest.approx(5e-4) for r in train)  # the schedule's 0.5 of --lr
    assert all(r["loss"]["first"] < 0.5 for r in train)  # halved: cross-entropy of two classes starts near 0.69
    config = (project / "run" / "config.yaml").read_text()
    assert "name: plain_sgd" in config and "momentum: 0.5" in config and "passes: 1" in config


def test_a_predictor_and_a_report_reach_affinity_and_report(project: Path, tiny_encoder: str) -> None:
    printed = _mtbio(["affinity", "--predictor", "more_words", "--tasks", "first,second", "--task-defs", "defs",
                      "--data-dir", "data", "--encoder", tiny_encoder, "--output", "aff"], project,
                     plugins=["recipe_format", "recipe_metric", "recipe_kind", "recipe_predictor"]).stdout
    affinity = json.loads((project / "aff" / "affinity.json").read_text())
    assert affinity["default_predictor"] == "more_words" and affinity["measurement"]["words"]["second"] == 40
    assert "source's training words minus the target's" in printed
    (project / "study").mkdir()
    (project / "study" / "notes.txt").write_text("three cells\n")
    shown = _mtbio(["--include-package", "recipe_report", "report", "study"], project).stdout
    assert "notes of study: three cells" in shown


DOCS = [ARCHITECTURE, *sorted(ARCHITECTURE.parent.glob("docs/*.md")), ARCHITECTURE.parent / "README.md"]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_the_docs_generated_lists_match_the_registries(page: Path) -> None:
    """A `<!-- generated: NAME -->` list is the registry's names; a stale one names the command that rewrites it."""
    from mtbio.experiments.components import fill_generated

    text = page.read_text()
    assert fill_generated(text) == text, f"stale generated list: run `mtbio components --fill {page.name}`"


def test_the_generated_lists_cover_kinds_metrics_and_the_training_components() -> None:
    """The docs' hand lists of these were replaced by generated ones (the metrics' list had lost three)."""
    from mtbio.experiments.components import GENERATED

    found = {m.group("name") for page in DOCS for m in GENERATED.finditer(page.read_text())}
    assert {"kinds", "metrics", "optimizers", "schedules", "mixers", "weightings"} <= found


def test_the_described_kinds_and_formats_are_every_registered_one() -> None:
    """docs/task_definitions.md describes each kind in its `type` row and each format (but `hf`) in its table."""
    from mtbio.experiments.components import component_names

    page = (ARCHITECTURE.parent / "docs" / "task_definitions.md").read_text()
    type_row = next(line for line in page.splitlines() if line.startswith("| `type` |")).split("<!-- /generated -->")[1]
    assert set(re.findall(r"`([a-z0-9_]+)` \(", type_row)) == set(component_names("kinds"))
    table = page.split("| format | input | columns / options |", 1)[1].split("\n\n", 1)[0]
    described = {name for row in re.findall(r"^\| (.+?) \|", table, re.M) for name in re.findall(r"`([a-z0-9_]+)`", row)}
    assert described | {"hf"} == set(component_names("formats"))


def test_components_fill_rewrites_a_stale_list(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Schedules: <!-- generated: schedules -->`linear`<!-- /generated -->.\n")
    assert _mtbio(["components", "--fill", str(page)], tmp_path).stdout.strip() == f"filled: {page}"
    assert page.read_text() == ("Schedules: <!-- generated: schedules -->`constant`, `cosine`, `linear`"
                                "<!-- /generated -->.\n")
    assert _mtbio(["components", "--fill", str(page)], tmp_path).stdout.strip() == f"unchanged: {page}"


def test_help_points_to_the_registries_and_rule_choices_come_from_one() -> None:
    """`--help` names no hand list: the component flags point to `mtbio components`, `--rule` lists RULES."""
    from click.testing import CliRunner

    from mtbio.cli import main
    from mtbio.reporting.verdicts import RULES

    refine = " ".join(CliRunner().invoke(main, ["refine", "--help"]).output.split())
    for registry in ("schedules", "optimizers", "mixers", "weightings"):
        assert f"`mtbio components {registry}` lists them" in refine
    assert "built in" not in refine
    report = " ".join(CliRunner().invoke(main, ["report", "--help"]).output.split())
    assert f"--rule [{'|'.join(RULES.names())}]" in report
