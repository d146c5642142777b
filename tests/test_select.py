"""mtbio select end to end on the synthetic keyword tasks: ranking, verified pairs, the three-way
comparison, select.json / select.md, and resuming after an interrupted run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import mtbio
import mtbio.experiments.sweep as sweep
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.select import select
from mtbio.experiments.study_config import StudyConfig


def _options(keyword_tasks: tuple[str, str], encoder: str, output: Path) -> dict[str, object]:
    defs, data = keyword_tasks
    return dict(target=["kw-few"], candidates=["kw-all", "kw-noise"], top=1, predictor="size_ratio", task_defs=[defs],
                data_dir=data, encoder=encoder, output=str(output), epochs=1, batch_size=8, lr=5e-3, seeds=2,
                max_train_examples=32)


def _stamps(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("results.json")}


def test_select_ranks_verifies_compares_and_resumes(tmp_path: Path, micro_encoder: str,
                                                    keyword_tasks: tuple[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sel"
    config = StudyConfig(**_options(keyword_tasks, micro_encoder, out))
    real, calls = sweep.train_tasks, []

    def interrupted(tasks, cell_config, run_dir, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(run_dir)
        if len(calls) == 3:  # the third cell is killed after it started writing
            Path(run_dir).mkdir(parents=True)
            (Path(run_dir) / "run.log").write_text("half a run\n")
            raise KeyboardInterrupt
        return real(tasks, cell_config, run_dir, *args, **kwargs)

    monkeypatch.setattr(sweep, "train_tasks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        select(config, echo=lambda _: None)
    monkeypatch.setattr(sweep, "train_tasks", real)
    finished = _stamps(out)
    assert len(finished) == 2 and not (out / "select.json").exists()

    lines: list[str] = []
    directory, result = select(config, echo=lines.append)
    assert result is not None and directory == out
    assert all(_stamps(out)[name] == stamp for name, stamp in finished.items())  # finished cells were not retrained
    assert any("prediction read back" in line for line in lines)
    # size_ratio: kw-all and kw-noise are equally large (capped at 32), so the order given decides: kw-all first
    assert [row["task"] for row in result["ranking"]] == ["kw-all", "kw-noise"]
    assert list(result["pairs"]) == ["kw-all"] and result["pairs"]["kw-all"]["n_seeds"] == 2
    assert result["selected"] == (["kw-all"] if result["pairs"]["kw-all"]["verdict"] == "improves" else [])
    assert sorted(p.name for p in (out / "pairwise" / "pairs").iterdir()) == ["kw-few+kw-all"]
    assert (out / "groups" / "kw-few+kw-all+kw-noise" / "seed-43" / "results.json").is_file()
    outcome = result["outcome"]
    assert set(outcome["scores"]) == {"alone", "selected", "all"}
    assert set(outcome["comparisons"]) == {"selected vs alone", "all vs alone", "selected vs all"}
    assert all(c["n_seeds"] == 2 and c["verdict"] == "no verdict"
               for c in outcome["comparisons"].values())
    assert outcome["family"]["m"] <= 3 and outcome["family"]["correction"] == "holm"
    saved = json.loads((out / "select.json").read_text())
    assert saved["selected"] == result["selected"] and saved["prediction_cost"]["wall_seconds"] >= 0
    summary = (out / "select.md").read_text()
    assert "# Partners for kw-few" in summary and "| selected vs alone |" in summary
    # refine-finetune (the default): the target fine-tuned from a refine run on the target and its partners
    group = out / "groups" / "kw-few+kw-all+kw-noise"
    tuned = yaml.safe_load((group / "seed-42" / "config.yaml").read_text())
    assert tuned["from_run"] == str(group / "refined" / "seed-42") and tuned["tasks"] == ["kw-few"]
    assert yaml.safe_load((group / "refined" / "seed-42" / "config.yaml").read_text())["tasks"] == \
        ["kw-few", "kw-all", "kw-noise"]
    # --matched-steps (the default): every arm as long as the pair, 1 epoch of 32 + the capped kw-few at batch 8
    steps = {str(p.parent.relative_to(out)): json.loads(p.read_text())["steps"] for p in out.rglob("results.json")
             if "prediction" not in str(p)}
    assert result["max_steps"] == steps["pairwise/pairs/kw-few+kw-all/seed-42"] > 0
    assert set(steps.values()) == {result["max_steps"]}, steps
    assert f"Every training run took {result['max_steps']} optimizer steps." in summary

    stamps = _stamps(out)
    defs, data = keyword_tasks
    again = CliRunner().invoke(main, ["select", "--target", "kw-few", "--candidates", "kw-all,kw-noise", "--top", "1",
                                      "--predictor", "size_ratio", "--task-defs", defs, "--data-dir", data,
                                      "--encoder", micro_encoder, "--output", str(out), "--epochs", "1",
                                      "--batch-size", "8", "--lr", "5e-3", "--seeds", "2",
                                      "--max-train-examples", "32"])
    assert again.exit_code == 0, again.output
    assert _stamps(out) == stamps and "# Partners for kw-few" in again.output  # nothing trained again


def test_select_without_verification_keeps_the_top_candidates(tmp_path: Path, micro_encoder: str,
                                                               keyword_tasks: tuple[str, str]) -> None:
    options = {k: v for k, v in _options(keyword_tasks, micro_encoder, tmp_path / "nv").items()
               if k not in ("target", "candidates", "top", "predictor", "seeds")}
    result = mtbio.select(target="kw-few", candidates="kw-all,kw-noise", top=1, predictor="size_ratio", verify=False,
                          seeds=1, eval_test=True, echo=lambda _: None, **options)  # the Python API
    assert result is not None and result["selected"] == ["kw-all"] and result["pairs"] is None
    # --eval-test: the three-way comparison on test, scored once per cell; dev beside it
    assert result["outcome_split"] == "test" and result["outcome"] != result["outcome_dev"]
    cell = json.loads((tmp_path / "nv" / "groups" / "kw-few+kw-all" / "seed-42" / "results.json").read_text())
    assert result["outcome"]["scores"]["selected"]["mean"] == cell["test"]["kw-few"]["accuracy"]
    assert result["outcome_dev"]["scores"]["selected"]["mean"] == cell["dev"]["kw-few"]["accuracy"]
    assert "| partners | kw-few test accuracy | dev" in (tmp_path / "nv" / "select.md").read_text()
    assert not (tmp_path / "nv" / "pairwise" / "pairs").exists()
    assert (tmp_path / "nv" / "groups" / "kw-few+kw-all" / "seed-42" / "results.json").is_file()
    assert "--no-verify" in (tmp_path / "nv" / "select.md").read_text()
    own = StudyConfig(**{**_options(keyword_tasks, micro_encoder, tmp_path / "own"), "verify": False, "seeds": 1,
                       "matched_steps": False, "group_training": "ratio"})
    _, unmatched = select(own, echo=lambda _: None)
    assert unmatched is not None and unmatched["max_steps"] is None
    alone, group = (json.loads((tmp_path / "own" / d / "seed-42" / "results.json").read_text())["steps"]
                    for d in ("pairwise/baselines/kw-few", "groups/kw-few+kw-all"))
    assert alone < group  # each its recipe epochs: the ratio mixer's epoch is twice the target's batches
    ratio = (tmp_path / "own" / "groups" / "kw-few+kw-all" / "seed-42" / "config.yaml").read_text()
    assert yaml.safe_load(ratio)["mixer"] == {"name": "ratio", "main_task": "kw-few", "ratio": 1.0}


def test_select_refuses_what_it_cannot_do(tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    options = _options(keyword_tasks, micro_encoder, tmp_path / "x")
    for update, message in (({"target": []}, "one target task"), ({"candidates": ["kw-few"]}, "at least one candidate"),
                            ({"candidates": []}, "needs candidates"),
                            ({"predictor": "nope"}, "unknown transfer predictor"),
                            ({"predictor": "cosine", "dry_run": True}, "needs its joint runs")):
        with pytest.raises((MtbioError, ValueError), match=message):  # an unknown predictor: refused by the config
            select(StudyConfig(**{**options, **update}), echo=lambda _: None)
    lines: list[str] = []
    assert select(StudyConfig(**{**options, "dry_run": True}), echo=lines.append) == (tmp_path / "x", None)
    assert any("pair kw-few + kw-all" in line for line in lines) and not (tmp_path / "x" / "pairwise" / "pairs").exists()


def test_select_adds_seeds_to_undecided_pairs_with_max_seeds(tmp_path: Path, micro_encoder: str,
                                                             keyword_tasks: tuple[str, str]) -> None:
    """--max-seeds 3 from 2 seeds: the pair (undecided: no verdict under 3 seeds) gets a third seed, with the
    target alone at it; the comparison arms keep the starting seeds."""
    out = tmp_path / "adaptive"
    config = StudyConfig(**{**_options(keyword_tasks, micro_encoder, out), "max_seeds": 3})
    lines: list[str] = []
    _, result = select(config, echo=lines.append)
    assert result is not None and result["pairs"]["kw-all"]["n_seeds"] == 3
    assert any("adaptive seeds: one more seed for the undecided pair(s) kw-all" in line for line in lines)
    assert (out / "pairwise" / "baselines" / "kw-few" / "seed-44" / "results.json").is_file()
    assert (out / "pairwise" / "pairs" / "kw-few+kw-all" / "seed-44" / "results.json").is_file()
    groups = out / "groups" / "kw-few+kw-all+kw-noise"
    assert sorted(p.name for p in groups.glob("seed-*")) == ["seed-42", "seed-43"]
    assert result["outcome"]["comparisons"]["all vs alone"]["n_seeds"] == 2
