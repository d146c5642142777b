"""The small-data recipe's floor and starts (issue 88): one floor (the best of the trivial score and every
no-training baseline), pair regressions in the form their probe favours, LP-FT starts that score what their probe
scores, fitted thresholds for positive-class F1, the benchmark's refusal and the demo's baseline row."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR

SAMPLES = ["--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR)]


def test_the_floor_is_the_best_of_the_trivial_score_and_the_baselines_with_one_warning(
        tmp_path: Path, tiny_encoder: str, monkeypatch) -> None:
    import mtbio.experiments.training_run as training_run
    from mtbio.model.floor import is_below_floor, task_floor

    assert task_floor(0.34, {"probe": 0.9, "cosine-mean": 0.5}, "accuracy") == {"score": 0.9, "source": "probe"}
    assert task_floor(0.34, {"probe": 0.2}, "accuracy") == {"score": 0.34, "source": "trivial"}
    assert task_floor(0.5, {"probe": 0.4}, "mse") == {"score": 0.4, "source": "probe"}  # lower is better
    assert is_below_floor(0.345, {"score": 0.34, "source": "trivial"}, "accuracy")  # within a point of a constant
    assert not is_below_floor(0.345, {"score": 0.34, "source": "probe"}, "accuracy")  # above a baseline
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(training_run, "no_training_baselines", lambda *a, **k: {"probe": 0.9})
    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", *SAMPLES, "--encoder", tiny_encoder,
                                     "--max-steps", "1", "--lr", "1e-9", "--max-length", "48", "--output", str(run)])
    assert done.exit_code == 0, done.output
    warnings = [line for line in done.output.splitlines() if line.startswith("demo-nli:") and "floor" in line]
    assert len(warnings) == 1, done.output  # below its trivial score and its probe: one line, naming the higher
    assert ("demo-nli: below its floor: dev accuracy" in warnings[0]
            and "a logistic regression on frozen features (probe 0.9000)" in warnings[0])
    results = json.loads((run / "demo-nli" / "results.json").read_text())
    assert results["floor"]["demo-nli"] == {"score": 0.9, "source": "probe"} and results["below_floor"] == ["demo-nli"]
    assert "not_learned" not in results and "below_baselines" not in results


def _task_defs_with_entity_relation(tmp_path: Path) -> Path:
    """The samples' definitions and a relation task of the `entity_relation` kind on the relation sample."""
    import shutil

    import yaml

    defs = tmp_path / "defs"
    shutil.copytree(SAMPLE_DIR / "task_defs", defs)
    relation = yaml.safe_load((defs / "demo-relation.yml").read_text())
    relation.update(name="demo-entities", type="entity_relation", entity_markers="keep",
                    type_options={"markers": ["@DRUG$", "@DRUG$"]})
    (defs / "demo-entities.yml").write_text(yaml.safe_dump(relation))
    return defs


def test_an_lp_ft_start_scores_what_its_probe_scores_for_every_kind(tmp_path: Path, tiny_encoder: str,
                                                                      monkeypatch) -> None:
    """A sentence-level head of a single text (relation classes) and of a pair (NLI), multi-label, a regression of
    two texts, entity-start relations and tagging: each LP-FT start's dev score is its probe baseline's."""
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    tasks = ["demo-relation", "demo-nli", "demo-hoc", "demo-sts", "demo-entities", "demo-ner"]
    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["refine", "--tasks", ",".join(tasks), "--task-defs",
                                     str(_task_defs_with_entity_relation(tmp_path)), "--data-dir", str(SAMPLE_DIR),
                                     "--encoder", tiny_encoder, "--lp-ft", "--max-steps", "1", "--max-length", "48",
                                     "--max-train-examples", "80", "--output", str(run)])
    assert done.exit_code == 0, done.output
    results = json.loads((run / "results.json").read_text())
    assert sorted(results["lp_start"]) == sorted(tasks)
    for task in tasks:
        metric = next(iter(results["dev"][task]))
        # classes and tags to the example; a regression's Pearson to float32 rounding of its predictions
        assert results["start_scores"][task][metric] == pytest.approx(results["baselines"][task]["probe"], abs=1e-6), task
    assert "pooling: mean" in (run / "tasks" / "demo-relation.yml").read_text()  # the probe's, not [CLS]
