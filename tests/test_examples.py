"""The scripts in examples/ run end to end (in a tiny mode: tiny encoder, demo data, few steps)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mtbio.experiments.demo import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]


def _run_script(name: str, cwd: Path, train_args: str, *args: str, **settings: str) -> subprocess.CompletedProcess:
    """examples/<name> with its settings in the environment, the demo task definitions and one thread."""
    env = dict(os.environ, DATA_DIR=str(SAMPLE_DIR), MTBIO=str(Path(sys.executable).parent / "mtbio"),
               TRAIN_ARGS=f"{train_args} --task-defs {SAMPLE_DIR / 'task_defs'}", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", **settings)
    return subprocess.run(["bash", str(REPO / "examples" / name), *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.long
def test_stabilization_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """Four variants x two seeds, tables with the trivial score and each remedy's Δ against standard; a
    rerun from the small files alone (a fresh clone) keeps the finished seeds instead of training them again."""
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 24"
    settings = dict(TASK="demo-nli", ENCODER=tiny_encoder, SEEDS="2", OUT=str(tmp_path / "runs"), FREEZE="1",
                    REINIT="1", PARALLEL="2", LR="1e-4", SPLITS="dev")   # the demo task has no test split
    done = _run_script("stabilization.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    for split in ("dev",):
        text = (tmp_path / "runs" / f"table-{split}.md").read_text()
        assert ("| type | task (metric) | trivial | standard | freeze | layerwise-decay | reinit | Δ freeze − standard "
                "(verdict) | Δ layerwise-decay − standard (verdict) | Δ reinit − standard (verdict) |") in text
        row = next(line for line in text.splitlines() if line.startswith("| NLI | demo-nli (accuracy) |"))
        # four score columns (mean ± sd), three Δ columns with their intervals, and the trivial score
        assert row.count("±") == 4 and row.count("] (") == 3 and row.split("|")[3].strip() not in ("", "–")
        assert (tmp_path / "runs" / f"table-{split}.csv").is_file()
    commands = (tmp_path / "runs" / "commands.md").read_text()
    assert "--freeze-layers 1" in commands and "--layerwise-lr-decay 0.8" in commands and "--reinit-layers 1" in commands
    for name, key, value in (("freeze", "freeze_layers", 1), ("layerwise-decay", "layerwise_lr_decay", 0.8),
                             ("reinit", "reinit_layers", 1), ("standard", "freeze_layers", None)):
        for seed in (42, 43):
            config = yaml.safe_load((tmp_path / "runs" / name / "demo-nli" / f"seed-{seed}" / "config.yaml").read_text())
            assert config[key] == value and config["seed"] == seed and config["lr"] == 1e-4
    results = sorted((tmp_path / "runs").rglob("results.json"))
    stamps = [p.stat().st_mtime_ns for p in results]
    for kept in ("checkpoints", "encoder", "heads"):   # a fresh clone holds only the committed small files
        for folder in list((tmp_path / "runs").rglob(kept)):
            shutil.rmtree(folder)
    again = _run_script("stabilization.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [p.stat().st_mtime_ns for p in results] == stamps and len(results) == 8
    # the runs folded into the study's one file (cells.jsonl), their folders gone: the rerun keeps them too
    table = (tmp_path / "runs" / "table-dev.md").read_text()
    packed = subprocess.run([sys.executable, "-m", "mtbio", "sweep", "pack", str(tmp_path / "runs"), "--remove"],
                            capture_output=True, text=True)
    assert packed.returncode == 0 and "removed 8 cell directories" in packed.stdout, packed.stderr[-2000:]
    again = _run_script("stabilization.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not list((tmp_path / "runs").rglob("results.json")) and (tmp_path / "runs" / "table-dev.md").read_text() == table


def _table3_tiny(tmp_path: Path, tiny_encoder: str) -> tuple[dict[str, str], str, str]:
    """examples/mtbert_biomedical.sh in tiny mode: three rows x two seeds and the dev table; returns its settings,
    training options and table."""
    settings = dict(TASKS="demo-relation,demo-ner", ENCODER=tiny_encoder, OUT=str(tmp_path / "runs"),
                    RESULTS=str(tmp_path / "results"), SEEDS="1 2", SPLITS="dev")
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16"
    done = _run_script("mtbert_biomedical.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    return settings, train_args, (tmp_path / "results" / "table-dev.md").read_text()


def test_mtbert_biomedical_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """The Table 3 study: three rows x two seeds, the report with trivial scores and verdicts. Then a rerun on a
    'new machine' (weights gone) that trains nothing because every cell's results are kept."""
    settings, train_args, table = _table3_tiny(tmp_path, tiny_encoder)
    assert "| trivial | single-task | mt-refinement | mt-fine-tune | Δ mt-fine-tune − single-task (verdict) |" in table
    assert "demo-relation" in table and "demo-ner" in table and "over 2 seeds" in table
    cells = sorted(str(p.parent.relative_to(tmp_path / "results")) for p in (tmp_path / "results").rglob("results.json"))
    assert cells == ["mt-fine-tune/seed-1/demo-ner", "mt-fine-tune/seed-1/demo-relation", "mt-fine-tune/seed-2/demo-ner",
                     "mt-fine-tune/seed-2/demo-relation", "refine/seed-1", "refine/seed-2",
                     "single-task/seed-1/demo-ner", "single-task/seed-1/demo-relation",
                     "single-task/seed-2/demo-ner", "single-task/seed-2/demo-relation"]
    for cell in cells:  # a row's tasks train in one process, each cell's config naming its own task(s)
        config = yaml.safe_load((tmp_path / "results" / cell / "config.yaml").read_text())
        assert config["tasks"] == (["demo-relation", "demo-ner"] if cell.startswith("refine") else [Path(cell).name])

    shutil.rmtree(tmp_path / "runs")  # a new machine: only the kept results
    again = _run_script("mtbert_biomedical.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (tmp_path / "runs").exists()  # nothing was retrained
    assert (tmp_path / "results" / "table-dev.md").read_text() == table


@pytest.mark.long
def test_adapters_script_on_the_table3_cells_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """examples/adapters.sh on Table 3's cells (TABLE3) and weights (OUT): the LoRA rows and the merged encoders,
    the LoRA rate and the merge method chosen on dev, the table; the refined encoder is Table 3's, not a new one."""
    settings, train_args, _ = _table3_tiny(tmp_path, tiny_encoder)
    refined = tmp_path / "runs" / "refine" / "seed-2" / "results.json"
    trained = refined.stat().st_mtime_ns
    adapters = _run_script("adapters.sh", tmp_path, train_args, **{
        **settings, "SEEDS": "2", "TABLE3": settings["RESULTS"], "RESULTS": str(tmp_path / "adapters"),
        "LORA_LRS": "1e-3", "MERGE_METHODS": "ties average"})
    assert adapters.returncode == 0, adapters.stderr[-2000:]
    assert refined.stat().st_mtime_ns == trained
    assert "LoRA learning rate chosen on dev" in adapters.stdout and "merge method chosen on dev" in adapters.stdout
    rows = (tmp_path / "adapters" / "table-dev.md").read_text()
    for row in ("single-task-lora", "mt-fine-tune", "refined-lora", "merged-"):
        assert row in rows, row
    merged = json.loads((tmp_path / "adapters" / "merged" / "ties" / "seed-2" / "results.json").read_text())
    assert set(merged["dev"]) == {"demo-relation", "demo-ner"} and merged["test"] == {}
    # both studies' cells folded into their one file each, on a new machine (weights gone): the rerun trains nothing,
    # chooses the same LoRA rate and merge method from the packed cells and writes the same table
    for study in (settings["RESULTS"], tmp_path / "adapters"):
        packed = subprocess.run([sys.executable, "-m", "mtbio", "sweep", "pack", str(study), "--remove"],
                                capture_output=True, text=True)
        assert packed.returncode == 0 and "removed 0 " not in packed.stdout, packed.stderr[-2000:]
    shutil.rmtree(tmp_path / "runs")
    again = _run_script("adapters.sh", tmp_path, train_args, **{
        **settings, "SEEDS": "2", "TABLE3": settings["RESULTS"], "RESULTS": str(tmp_path / "adapters"),
        "LORA_LRS": "1e-3", "MERGE_METHODS": "ties average"})
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (tmp_path / "runs").exists() and not list((tmp_path / "adapters").rglob("results.json"))
    chosen = [line for line in adapters.stdout.splitlines() if "chosen on dev" in line]
    assert len(chosen) == 2 and [line for line in again.stdout.splitlines() if "chosen on dev" in line] == chosen
    assert (tmp_path / "adapters" / "table-dev.md").read_text() == rows


def test_adapters_script_copies_sharing_a_machine_train_each_cell_once(tmp_path: Path, tiny_encoder: str) -> None:
    """Two copies of examples/adapters.sh both train the learning-rate seed's LoRA cell: they take turns
    (the cell trained by one copy, the other finds it done), neither fails."""
    settings = dict(TASKS="demo-relation", ENCODER=tiny_encoder, OUT=str(tmp_path / "runs"),
                    RESULTS=str(tmp_path / "results"), SEEDS="1", SPLITS="dev", ROWS="single-task-lora",
                    LORA_LRS="1e-3")
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16"
    env = dict(os.environ, DATA_DIR=str(SAMPLE_DIR), MTBIO=str(Path(sys.executable).parent / "mtbio"),
               TRAIN_ARGS=f"{train_args} --task-defs {SAMPLE_DIR / 'task_defs'}", OMP_NUM_THREADS="1", **settings)
    copies = [subprocess.Popen(["bash", str(REPO / "examples" / "adapters.sh")], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for copy in copies:
        _, err = copy.communicate()
        assert copy.returncode == 0, err[-2000:]
    run = tmp_path / "runs" / "single-task-lora" / "lr-1e-3" / "seed-1" / "demo-relation"
    assert (tmp_path / "results" / "single-task-lora" / "lr-1e-3" / "seed-1" / "demo-relation" / "results.json").is_file()
    assert "resumed" not in (run / "run.log").read_text()  # trained once, from the start, by one copy


def test_recipe_search_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """Two learning rates on one task: a run per lr, the table of dev scores per epoch, the best one marked."""
    done = _run_script("recipe_search.sh", tmp_path, f"--encoder {tiny_encoder} --epochs 2 --max-length 32 "
                       "--batch-size 8 --max-train-examples 16", TASKS="demo-relation", LRS="1e-4 1e-3",
                       OUT=str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| demo-relation")]
    assert [r.split("|")[2].strip() for r in rows] == ["1e-4", "1e-3"]
    assert all(len(r.split("|")) == 6 for r in rows)  # two epochs each
    assert sum(r.count("**") for r in rows) == 2  # one best cell
    # the runs' small files (as examples/recipe_search keeps them, weights gone) folded into the search's cells.jsonl,
    # their folders gone: the same table from the file
    for weights in ("encoder", "heads", "checkpoints"):
        for folder in (tmp_path / "s").glob(f"*/lr-*/*/{weights}"):
            shutil.rmtree(folder)
    packed = subprocess.run([sys.executable, "-m", "mtbio", "sweep", "pack", str(tmp_path / "s"), "--remove"],
                            capture_output=True, text=True)
    assert packed.returncode == 0 and "removed 2 cell directories" in packed.stdout, packed.stderr[-2000:]
    shown = subprocess.run([sys.executable, str(REPO / "examples" / "recipe_summary.py"), str(tmp_path / "s")],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.splitlines() == done.stdout.splitlines()[-len(rows) - 2:]


@pytest.mark.long  # its sweep is tested end to end in tests/test_relations.py and tests/test_sweep_*.py
def test_pairwise_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """Two seeds, two cells at a time, then the graph over both seeds; weights stay out of git, a
    rerun trains nothing."""
    out = tmp_path / "pairwise_demo"
    settings = dict(TASKS="demo-relation,demo-ner,demo-nli", ENCODER=tiny_encoder, OUT=str(out), SEEDS="1 2",
                    PARALLEL="2")
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16"
    done = _run_script("pairwise.sh", tmp_path, train_args, "demo", **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    relations = json.loads((out / "relations.json").read_text())
    assert relations["seeds"] == [1, 2] and len(relations["edges"]) == 6
    cells = sorted(str(p.parent.relative_to(out)) for p in out.rglob("results.json"))
    assert len(cells) == 2 * (3 + 3) and "pairs/demo-relation+demo-ner/seed-2" in cells
    assert (out / "relations.png").is_file() and not list(out.rglob("*.safetensors"))
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q",
                              "examples/pairwise_x/baselines/a/seed-1/encoder/model.safetensors"], cwd=REPO)
    assert ignored.returncode == 0
    again = _run_script("pairwise.sh", tmp_path, train_args, "demo", **settings)
    assert again.returncode == 0 and "[1/" not in again.stdout + again.stderr
    # examples/affinity.sh on the same tasks: the predicted graph, then its check against this sweep
    predicted = tmp_path / "affinity_demo"
    affinity = _run_script("affinity.sh", tmp_path, train_args, "demo", TASKS=settings["TASKS"], ENCODER=tiny_encoder,
                           OUT=str(predicted), PAIRWISE=str(out), SEEDS="2", AFFINITY_ARGS="--affinity-every 1")
    assert affinity.returncode == 0, affinity.stderr[-2000:]
    assert json.loads((predicted / "affinity.json").read_text())["seeds"] == [42, 43]
    comparison = json.loads((predicted / "comparison.json").read_text())
    assert "spearman" in json.dumps(comparison) and (predicted / "comparison.png").is_file()
    assert "Spearman" in (predicted / "comparison.txt").read_text()


@pytest.mark.long
def test_transfer_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """The plain refine and its L2-SP variant, each target from every start; a rerun trains nothing."""
    out = tmp_path / "transfer_demo"
    settings = dict(REFINE_ON="demo-relation,demo-ner", TARGETS="demo-sts,demo-nli", SIZES="8,all", SEEDS="1",
                    L2SP="10", ENCODER=tiny_encoder, OUT=str(out))
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16"
    done = _run_script("transfer.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    table = json.loads((out / "transfer.json").read_text())
    starts = {start for target in table["targets"] for point in target["points"] for start in point["from"]}
    assert starts == {"demo-relation+demo-ner", "l2sp-10"}
    assert yaml.safe_load((out / "variants" / "l2sp-10" / "config.yaml").read_text())["l2sp"] == 10
    printed = subprocess.run([sys.executable, str(REPO / "examples" / "transfer_table.py"), str(out)],
                             capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr[-2000:]
    rows = [line for line in printed.stdout.splitlines() if line.startswith(("| demo-sts |", "| demo-nli |"))]
    assert len(rows) == sum(len(target["points"]) for target in table["targets"]) >= 2
    assert all(line.count("|") == 10 for line in rows)  # 9 columns: two refined starts
    assert "| l2sp-10 vs demo-relation+demo-ner |" in printed.stdout  # the mean over points, every pair of starts
    again = _run_script("transfer.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0 and "[1/" not in again.stdout + again.stderr


def test_the_transfer_pages_tables_follow_the_rule_of_its_file() -> None:
    """examples/transfer_biomedical.md shows transfer_table.py's tables of the committed transfer.json, which label
    a comparison whose interval settles neither way "undecided", never "no effect"; the page says it is superseded."""
    printed = subprocess.run([sys.executable, str(REPO / "examples" / "transfer_table.py")], capture_output=True,
                             text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert printed.returncode == 0, printed.stderr[-2000:]
    page = (REPO / "examples" / "transfer_biomedical.md").read_text()
    main_table = printed.stdout[printed.stdout.index("| target | n |"):printed.stdout.index("\n\nMean over")].strip()
    average = printed.stdout[printed.stdout.index("| start | mean over points |"):].strip()
    assert main_table in page and average in page
    rows = [line for line in main_table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 12 and sum(line.count(", undecided") for line in rows) == 16
    assert all(", no effect" not in line for line in rows if not line.startswith("| hoc |"))  # HoC: 0.0 everywhere
    assert "Δ [99.7–99.8% CI]" in main_table and "superseded" in page and "examples/embed_study.md" in page


def test_predictor_validation_script_reads_the_committed_graphs(tmp_path: Path) -> None:
    """Every committed predictor judged within target on both committed graphs, p values Holm-adjusted per graph."""
    done = subprocess.run([sys.executable, str(REPO / "examples" / "predictor_validation.py"), "--output", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    for family, targets in (("biomedical", 4), ("clinical-public", 4), ("pooled", 8)):
        judged = summary[family]
        assert set(judged["predictors"]) == {"lookahead", "cosine", "size_ratio", "text_similarity", "fisher",
                                             "same_type"}
        rows = sorted(judged["predictors"].values(), key=lambda row: row["permutation_p"])
        assert all(row["targets"] == targets and row["holm_p"] >= row["permutation_p"] for row in rows)
        assert rows[0]["holm_p"] == min(1.0, 6 * rows[0]["permutation_p"])
    every = [row for family in ("biomedical", "clinical-public") for row in summary[family]["predictors"].values()]
    smallest = min(every, key=lambda row: row["permutation_p"])  # Holm over all 12 predictor x graph tests
    assert smallest["holm_all_p"] == pytest.approx(min(1.0, 12 * smallest["permutation_p"]))
    assert "| biomedical predictor |" in done.stdout


def test_select_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """A small target beside full-size candidates: ranked, verified, trained with its partners; a rerun trains nothing."""
    out = tmp_path / "select_demo"
    settings = dict(TARGETS="demo-ner", CANDIDATES="demo-relation,demo-nli,demo-sts", TARGET_EXAMPLES="8",
                    PREDICTOR="size_ratio", TOP="1", SEEDS="2", ENCODER=tiny_encoder, OUT=str(out), PREDICTOR_ARGS="")
    train_args = "--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16"
    done = _run_script("select.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "demo-ner" / "select.json").read_text())
    assert result["target"] == "demo-ner" and len(result["ranking"]) == 3 and result["seeds"] == [42, 43]
    assert "alone" in json.dumps(result["outcome"]) and (out / "demo-ner" / "select.md").is_file()
    # the target is the small one: size_ratio ranks every full-size candidate log(16/8) above it
    assert all(row["score"] == pytest.approx(math.log(2)) for row in result["ranking"])
    configs = list((out / "demo-ner").rglob("config.yaml"))
    assert configs and all(yaml.safe_load(c.read_text())["task_examples"] == ["demo-ner=8"] for c in configs)
    again = _run_script("select.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0 and "[1/" not in again.stdout + again.stderr
    settings.update(OUT=str(tmp_path / "select_again"), PREDICTION_FROM=str(out))  # the ranking read back
    reread = _run_script("select.sh", tmp_path, train_args, **settings)
    assert reread.returncode == 0, reread.stderr[-2000:]
    assert "prediction read back from" in reread.stdout + reread.stderr
    ranking = json.loads((tmp_path / "select_again" / "demo-ner" / "select.json").read_text())["ranking"]
    assert ranking == result["ranking"]
    read_back = tmp_path / "select_again" / "demo-ner" / "prediction-size_ratio"
    assert [p.name for p in read_back.iterdir()] == ["affinity.json"]  # the earlier study's cells stay there
    assert (read_back / "affinity.json").read_bytes() == (out / "demo-ner" / "prediction-size_ratio" / "affinity.json").read_bytes()


@pytest.mark.long
def test_select_training_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """The target alone, with its partner through the ratio mixer, and fine-tuned from the refined pair: every run
    the same steps, the dev tables (each arm against alone; the arms against each other)."""
    out = tmp_path / "training"
    settings = dict(TARGET="demo-ner", PARTNER="demo-relation", TARGET_EXAMPLES="8", STEPS="3", SEEDS="1",
                    ENCODER=tiny_encoder, OUT=str(out))
    train_args = "--max-length 32 --batch-size 8 --max-train-examples 16"
    done = _run_script("select_training.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    for arm in ("alone/seed-1/demo-ner", "ratio/seed-1", "refine-finetune/seed-1/demo-ner"):
        results = json.loads((out / arm / "results.json").read_text())
        assert results["steps"] == 3, arm
    tuned = yaml.safe_load((out / "refine-finetune" / "seed-1" / "demo-ner" / "config.yaml").read_text())
    assert tuned["task_examples"] == ["demo-ner=8"] and "pair/seed-1" in str(tuned.get("from_run") or tuned)
    assert "mixer: ratio" in (out / "ratio" / "seed-1" / "config.yaml").read_text()
    table = (out / "table-dev.md").read_text()
    assert "| alone | ratio | refine-finetune |" in table and "Δ refine-finetune − alone" in table
    assert "Δ refine-finetune − ratio" in (out / "table-dev-arms.md").read_text()


def test_small_data_floor_script_and_table_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """examples/small_data_floor.sh: both arms x two seeds of a demo task, kept as small files with their
    baselines; examples/small_data_floor.py's table and tests; a rerun on a 'new machine' trains nothing."""
    settings = dict(TASKS="demo-nli demo-relation", SIZES="24", SEEDS="1 2", ENCODER=tiny_encoder,
                    OUT=str(tmp_path / "runs"), RESULTS=str(tmp_path / "results"),
                    RECIPE_ARGS="--recipe minilm --lp-ft --min-steps 6", LARGE_TASKS="demo-relation", LARGE_SIZE="16")
    train_args = "--max-steps 3 --max-length 32 --batch-size 8"
    planned = _run_script("small_data_floor.sh", tmp_path, train_args, PLAN_ONLY="1", **settings)
    assert planned.stdout.split("\n")[:3] == ["24 demo-nli", "24 demo-relation", "16 demo-relation"]  # large last
    settings.update(TASKS="demo-nli", LARGE_TASKS="")  # the cells: one task at one size, both arms, two seeds
    done = _run_script("small_data_floor.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    cells = sorted(str(p.parent.relative_to(tmp_path / "results")) for p in (tmp_path / "results").rglob("results.json"))
    assert cells == [f"{arm}/demo-nli/n-24/seed-{s}" for arm in ("recipe", "today") for s in (1, 2)]
    kept = json.loads((tmp_path / "results" / "recipe" / "demo-nli" / "n-24" / "seed-1" / "results.json").read_text())
    assert kept["lp_start"] == ["demo-nli"] and "probe" in kept["baselines"]["demo-nli"]
    # a cell kept before the start was evaluated: START_CHECK evaluates it again, to the same scores
    old = tmp_path / "results" / "recipe" / "demo-nli" / "n-24" / "seed-1"
    (old / "results.json").write_text(json.dumps({k: v for k, v in kept.items() if k != "start_scores"}))
    checked = _run_script("small_data_floor.sh", tmp_path, train_args, START_CHECK="1", **settings)
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert json.loads((old / "start.json").read_text())["start_scores"] == kept["start_scores"] != {}
    today = yaml.safe_load((tmp_path / "results" / "today" / "demo-nli" / "n-24" / "seed-1" / "config.yaml").read_text())
    assert today["lp_ft"] is False and today["steps"]["min_steps"] == 1 and today["pooling"] == "task"
    assert not list((tmp_path / "runs").rglob("*.safetensors"))  # weights are not kept
    shown = subprocess.run([sys.executable, str(REPO / "examples" / "small_data_floor.py"), "--results",
                            str(tmp_path / "results")], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "| demo-nli | 24 | accuracy |" in shown.stdout and "Floor held" in shown.stdout
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert "demo-nli n=24" in summary["recipe_vs_today"]
    assert summary["recipe_vs_today"]["demo-nli n=24"]["n_seeds"] == 2  # 2 seeds: no verdict
    assert "no verdict (2 seeds" in shown.stdout
    shutil.rmtree(tmp_path / "runs")
    again = _run_script("small_data_floor.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0 and not (tmp_path / "runs").exists()


def test_sequential_error_script_writes_its_rows(tmp_path: Path) -> None:
    """examples/sequential_error.py with a few simulated graphs: a row per spread and design, rates in [0, 1]."""
    done = subprocess.run([sys.executable, str(REPO / "examples" / "sequential_error.py"), "--runs", "3",
                           "--power-runs", "2", "--v3-runs", "20", "--output", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(r["rule"], r["design"], r["sd_points"]) for r in summary["null"]][:2] == [
        ("v1", "adaptive 3 -> 8", 1.0), ("v1", "adaptive 3 -> 8", 2.0)]
    assert len(summary["null"]) == 20 and all(0 <= r["family_wise_error"] <= 1 for r in summary["null"])
    assert len(summary["power"]) == 15 and all(0 <= r["power"] <= 1 for r in summary["power"])
    assert all(r["mean_seeds"] == 8 for r in summary["null"] if r["design"] == "fixed 8")
    v3 = json.loads((tmp_path / "v3.json").read_text())["rows"]  # 4 designs × (4 null + 3 + 3 spreads)
    assert len(v3) == 40 and all(0 <= r["false_direction"] <= 1 and 0 <= r["false_size"] <= 1 for r in v3)
    assert all("power_higher" in r for r in v3 if r["scenario"] == "one +2-point edge")


def test_decision_rule_v2_lists_every_committed_change(tmp_path: Path) -> None:
    """examples/decision_rule_v2.py re-judges the committed studies under both rules: its output is the page's list."""
    done = subprocess.run([sys.executable, str(REPO / "examples" / "decision_rule_v2.py"), "--output",
                           str(tmp_path / "changes.json")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    page = (REPO / "examples" / "decision_rule_v2.md").read_text()
    assert len(rows) == 12 and all(row in page for row in rows)


@pytest.mark.long
def test_select_per_task_script_and_table_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    """examples/select_per_task.sh: a joint run per seed keeping both selections, kept as small files; the table's
    test comparison per task; a rerun trains nothing."""
    defs = tmp_path / "defs"
    defs.mkdir()
    for name, folder, ext in (("demo-ner", "ner", "tsv"), ("demo-relation", "relation", "tsv")):
        text = (SAMPLE_DIR / "task_defs" / f"{name}.yml").read_text().replace(f"name: {name}", f"name: {name}-t")
        (defs / f"{name}-t.yml").write_text(text.replace(f"  dev: {folder}/dev.{ext}",
                                                         f"  dev: {folder}/dev.{ext}\n  test: {folder}/dev.{ext}"))
    settings = dict(TASKS="demo-ner-t,demo-relation-t", SEEDS="1 2", SIZE="24", EVAL_EXAMPLES="16", EVAL_EVERY="2",
                    ENCODER=tiny_encoder, OUT=str(tmp_path / "runs"), RESULTS=str(tmp_path / "results"))
    train_args = f"--max-steps 6 --max-length 32 --batch-size 8 --lr 1e-3 --no-baselines --task-defs {defs}"
    done = _run_script("select_per_task.sh", tmp_path, train_args, **settings)
    assert done.returncode == 0, done.stderr[-2000:]
    kept = sorted(str(p.relative_to(tmp_path / "results")) for p in (tmp_path / "results").rglob("results.json"))
    assert kept == [f"seed-{s}/{part}" for s in (1, 2) for part in
                    ("best/demo-ner-t/results.json", "best/demo-relation-t/results.json", "results.json")]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.safetensors"))
    shown = subprocess.run([sys.executable, str(REPO / "examples" / "select_per_task.py"), "--results",
                            str(tmp_path / "results")], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "| demo-ner-t (entity_f1) | 2 |" in shown.stdout and "no verdict (2 seeds" in shown.stdout
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    for row in summary["rows"]:  # the per-task arm is the task's best dev evaluation: never below the default's on dev
        assert row["dev"]["per_task"][0] >= row["dev"]["default"][0] - 1e-12
    again = _run_script("select_per_task.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0 and "refine" not in again.stderr
    # the seeds folded into RESULTS/cells.jsonl, their folders gone: the same table from the file, a rerun trains nothing
    packed = subprocess.run([sys.executable, "-m", "mtbio", "sweep", "pack", str(tmp_path / "results"), "--remove"],
                            capture_output=True, text=True)
    assert packed.returncode == 0 and "removed 2 cell directories" in packed.stdout, packed.stderr[-2000:]
    from_file = subprocess.run([sys.executable, str(REPO / "examples" / "select_per_task.py"), "--results",
                                str(tmp_path / "results")], capture_output=True, text=True)
    assert from_file.returncode == 0 and from_file.stdout == shown.stdout, from_file.stderr[-2000:]
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)
    again = _run_script("select_per_task.sh", tmp_path, train_args, **settings)
    assert again.returncode == 0 and not (tmp_path / "runs").exists()
