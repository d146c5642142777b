"""Keeping what the encoder knew (issue 89): `mtbio merge --with-start` (WiSE-FT) and the `contrastive_pair` kind
(multiple-negatives ranking on a pair task's positive pairs), on tiny random encoders and the demo samples."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner
from safetensors.torch import load_file

from mtbio.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"
SENTENCES = ["Aspirin reduced the fever.", "KRAS mutations drive tumours in the pancreas.", "The weather was cold."]


def _sts_bi(directory: Path) -> Path:
    """The demo similarity sample as a bi_encoder task (exports in the sentence-transformers layout)."""
    definition = yaml.safe_load((SAMPLE / "task_defs" / "demo-sts.yml").read_text())
    definition.update({"name": "demo-sts-bi", "type": "bi_encoder", "type_options": {"label_range": [0, 5]}})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "demo-sts-bi.yml").write_text(yaml.safe_dump(definition))
    return directory


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    """A short refine of the tiny encoder on the bi-encoder similarity sample and the NLI sample."""
    root = tmp_path_factory.mktemp("refined")
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-sts-bi,demo-nli", "--task-defs", str(_sts_bi(root / "defs")),
                                       "--task-defs", str(SAMPLE / "task_defs"), "--encoder", tiny_encoder,
                                       "--data-dir", str(SAMPLE), "--max-steps", "6", "--batch-size", "8",
                                       "--lr", "1e-3", "--max-train-examples", "48", "--output", str(root / "run")])
    assert result.exit_code == 0, result.output
    return root / "run"


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().view(torch.int32)


def test_with_start_gives_the_start_the_run_and_the_midpoint(refined: Path, tiny_encoder: str, tmp_path: Path) -> None:
    start = load_file(f"{tiny_encoder}/model.safetensors")
    run = load_file(str(refined / "encoder/model.safetensors"))
    floats = [name for name, value in start.items() if value.is_floating_point()]
    assert any(not torch.equal(start[n], run[n]) for n in floats)  # the refine moved the encoder
    merged = {}
    for alpha in ("0", "1", "0.5"):
        out = tmp_path / f"alpha-{alpha}"
        result = CliRunner().invoke(main, ["merge", str(refined), "--with-start", alpha, "--output", str(out)])
        assert result.exit_code == 0, result.output
        merged[alpha] = load_file(str(out / "encoder/model.safetensors"))
        assert set(merged[alpha]) == set(start)
        assert sorted(p.name for p in (out / "heads").iterdir()) == ["demo-nli", "demo-sts-bi"]  # the run's heads
        heads = load_file(str(out / "heads/demo-nli/model.safetensors"))
        kept = load_file(str(refined / "heads/demo-nli/model.safetensors"))
        assert all(torch.equal(heads[k], kept[k]) for k in kept)
    for name in floats:
        assert torch.equal(_bits(merged["0"][name]), _bits(start[name])), name  # bit for bit
        assert torch.equal(_bits(merged["1"][name]), _bits(run[name])), name
        torch.testing.assert_close(merged["0.5"][name], (start[name] + run[name]) / 2, rtol=0, atol=1e-7, msg=name)
    results = json.loads((tmp_path / "alpha-0.5/results.json").read_text())
    assert (results["stage"], results["method"], results["alpha"]) == ("merge", "with-start", 0.5)
    assert results["merged_from"] == [str(refined)] and results["encoder_source"] == tiny_encoder
    # the merged run is a run: evaluate scores it like any other
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "alpha-0.5"), "--data-dir", str(SAMPLE)])
    assert result.exit_code == 0, result.output


def test_with_start_refuses_what_it_cannot_do_in_one_line(refined: Path, tmp_path: Path) -> None:
    cases = [(["--with-start", "1.5"], "--with-start 1.5: the run's share of the encoder, in [0, 1]"),
             ([str(refined), "--with-start", "0.5"], "give one RUN_DIR (got 2)"),
             (["--with-start", "0.5", "--method", "average"], "give one RUN_DIR and no --method (they merge several")]
    for extra, message in cases:
        result = CliRunner().invoke(main, ["merge", str(refined), *extra, "--output", str(tmp_path / "m")])
        assert result.exit_code == 2 and message in result.output, result.output


def test_an_interpolated_run_exports_and_loads_in_sentence_transformers(refined: Path, tmp_path: Path) -> None:
    import mtbio
    from mtbio.model.heads import pool

    merged = tmp_path / "merged"
    assert CliRunner().invoke(main, ["merge", str(refined), "--with-start", "0.5", "--output", str(merged)]).exit_code == 0
    exported = tmp_path / "export"
    result = CliRunner().invoke(main, ["export", str(merged), "--task", "demo-sts-bi", "--output", str(exported)])
    assert result.exit_code == 0, result.output
    card = (exported / "README.md").read_text()
    assert "`mtbio merge --with-start 0.5`" in card and str(refined) in card
    code = ("import json, sys; from sentence_transformers import SentenceTransformer; "
            f"m = SentenceTransformer({str(exported)!r}, device='cpu'); "
            f"print(json.dumps({{'mtbio': 'mtbio' in sys.modules, 'e': m.encode({SENTENCES!r}).tolist()}}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["mtbio"] is False
    run = mtbio.load(merged, precision="no")
    ours = []
    with torch.no_grad():
        for text in SENTENCES:  # mtbio's mean pooling of the merged encoder, one text at a time
            encoded = run.tokenizer(text, return_tensors="pt")
            ours.append(pool(run.model.encoder(**encoded).last_hidden_state, encoded["attention_mask"], "mean")[0])
    torch.testing.assert_close(torch.tensor(loaded["e"]), torch.stack(ours), rtol=1e-5, atol=1e-5)


# ---- the contrastive_pair kind: multiple-negatives ranking on a pair task's positive pairs -------------------------
PAIRS = [("Aspirin reduced the fever.", "The fever went down after aspirin was given.", "1"),
         ("KRAS mutations drive tumours.", "Mutant KRAS is an oncogenic driver in pancreatic cancer.", "1"),
         ("What causes a migraine?", "The weather was cold.", "0"),
         ("Is ibuprofen safe in pregnancy?", "Can I take ibuprofen while pregnant?", "1"),
         ("How long does a cold last?", "Metformin lowers blood glucose.", "0"),
         ("The patient denies chest pain.", "No chest pain was reported by the patient.", "1")]


def _contrastive_task(**options: object) -> object:
    from mtbio.tasks.schema import TaskDef

    return TaskDef.model_validate({"name": "pairs-mnrl", "type": "contrastive_pair", "format": "tsv",
                                   "columns": {"text": 0, "text_b": 1, "label": 2}, "files": {"train": "x.tsv"},
                                   "labels": ["0", "1"], "type_options": {"positive": "1", **options}})


def test_its_loss_is_sentence_transformers_multiple_negatives_ranking_loss(tiny_encoder: str) -> None:
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.losses import MultipleNegativesRankingLoss
        from sentence_transformers.models import Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer

    from mtbio.data.example import Example
    from mtbio.data.pipeline import featurize_raw
    from mtbio.experiments.training_run import head_config_for
    from mtbio.model.heads import build_head
    from mtbio.model.multitask import MultiTaskModel

    task = _contrastive_task()
    tokenizer, encoder = AutoTokenizer.from_pretrained(tiny_encoder), AutoModel.from_pretrained(tiny_encoder)
    model = MultiTaskModel(encoder, {task.name: build_head(head_config_for(task, encoder.config.hidden_size))}).eval()
    body = Transformer(tiny_encoder)
    theirs = SentenceTransformer(modules=[body, Pooling(encoder.config.hidden_size, pooling_mode="mean")], device="cpu")
    theirs.eval()
    mnrl = MultipleNegativesRankingLoss(theirs)  # scale 20, cosine: the defaults
    assert mnrl.scale == 20.0

    def ours(pairs: list[tuple[str, str, str]]) -> float:
        examples = [Example(uid=str(i), label=label, text=a, text_b=b) for i, (a, b, label) in enumerate(pairs)]
        data = featurize_raw(task, examples, tokenizer)
        batch = data.batch(range(len(data)), pad_token_id=tokenizer.pad_token_id)
        with torch.no_grad():
            return float(model(task.name, **batch).loss)

    positives = [(a, b) for a, b, label in PAIRS if label == "1"]
    tokenize = getattr(theirs, "preprocess", None) or theirs.tokenize  # `tokenize` before sentence-transformers 6
    features = [tokenize([a for a, _ in positives]), tokenize([b for _, b in positives])]
    with torch.no_grad():
        reference = float(mnrl(features, None))
    assert reference > 0.1  # a loss that can tell a model from another
    assert ours([p for p in PAIRS if p[2] == "1"]) == pytest.approx(reference, abs=1e-6)
    # the other pairs of a mixed batch are neither anchors nor candidates
    assert ours(PAIRS) == pytest.approx(reference, abs=1e-6)
    assert ours([p for p in PAIRS if p[2] == "0"]) == 0.0
    # a batch-size effect: fewer in-batch negatives, a smaller loss than ST's on the whole batch
    assert ours([p for p in PAIRS if p[2] == "1"][:2]) < reference


def test_its_definition_is_checked_and_its_metric_is_the_cosines_roc_auc() -> None:
    from mtbio.kinds.contrastive_pair import pair_auc

    with pytest.raises(ValueError, match="type_options: positive 'yes' is not one of the labels"):
        _contrastive_task(positive="yes")
    with pytest.raises(ValueError, match="type_options.scale"):
        _contrastive_task(scale=0)
    task = _contrastive_task()
    assert task.metric == "pair_auc"
    assert pair_auc(["1", "0", "1", "0"], [0.9, 0.1, 0.8, 0.2], task) == 1.0
    assert pair_auc(["1", "0", "1", "0"], [0.1, 0.9, 0.2, 0.8], task) == 0.0
    assert pair_auc(["1", "0", "1", "0"], [0.5, 0.5, 0.9, 0.1], task) == 0.875  # a tie counts a half
    assert pair_auc(["1", "0"], [0.3, 0.3], task) == 0.5  # the trivial predictor: one cosine for every pair
    with pytest.raises(Exception, match="pair_auc needs positive and other pairs"):
        pair_auc(["1", "1"], [0.3, 0.4], task)


def test_a_refine_over_a_shipped_task_keeps_the_contrastive_objective_in_its_mix(
        tmp_path: Path, tiny_encoder: str, data_dir: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["refine", "--tasks", "chemprot,mqp-mnrl", "--encoder", tiny_encoder,
                                       "--data-dir", str(data_dir), "--max-train-examples", "64",
                                       "--max-eval-examples", "64", "--max-steps", "4", "--batch-size", "16",
                                       "--lr", "1e-3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "dev  mqp-mnrl: pair_auc 0." in result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    [train] = [line for line in lines if line["split"] == "train"]
    assert set(train["loss"]) == {"chemprot", "mqp-mnrl"} and train["loss"]["mqp-mnrl"] > 0
    results = json.loads((out / "results.json").read_text())
    assert 0 <= results["dev"]["mqp-mnrl"]["pair_auc"] <= 1 and results["trivial"]["mqp-mnrl"] == 0.5
    # its predictions are the pairs' cosines, from a fresh load of the run
    import mtbio

    predicted = mtbio.load(out).predict("mqp-mnrl", [("Is ibuprofen safe in pregnancy?",
                                                      "Can I take ibuprofen while pregnant?")])
    assert len(predicted) == 1 and -1 <= predicted[0] <= 1


def test_an_interpolated_run_is_a_refinement_that_saw_its_runs_tasks(refined: Path, tmp_path: Path) -> None:
    """`transfer --refine-on` an interpolated run refuses a target that run was refined on, as it does for the run."""
    from mtbio.errors import MtbioError
    from mtbio.experiments.study_config import StudyConfig
    from mtbio.experiments.transfer import transfer_plan

    merged = tmp_path / "merged"
    assert CliRunner().invoke(main, ["merge", str(refined), "--with-start", "0.3", "--output", str(merged)]).exit_code == 0
    config = StudyConfig(refine_on=[str(merged)], transfer_targets=["demo-nli"], data_dir=str(SAMPLE),
                         task_defs=[str(refined / "tasks")])
    with pytest.raises(MtbioError, match="demo-nli are in every refinement set"):
        transfer_plan(config)


def test_a_refine_under_way_is_a_start_whose_cells_wait(refined: Path, tmp_path: Path) -> None:
    """`transfer --refine-on DIR` takes a refine that has written its config.yaml but not finished (the plain
    cells can run meanwhile); a folder that is neither is refused in one line."""
    import shutil

    from mtbio.errors import MtbioError
    from mtbio.experiments.study_config import StudyConfig
    from mtbio.experiments.transfer import transfer_plan

    under_way = tmp_path / "under-way"
    under_way.mkdir()
    shutil.copy(refined / "config.yaml", under_way / "config.yaml")
    config = StudyConfig(refine_on=[str(under_way)], transfer_targets=["demo-nli"], data_dir=str(SAMPLE),
                         task_defs=[str(refined / "tasks")])
    with pytest.raises(MtbioError, match="demo-nli are in every refinement set"):  # its tasks are read
        transfer_plan(config)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MtbioError, match="nor a refine under way"):
        transfer_plan(StudyConfig(refine_on=[str(tmp_path / "empty")], transfer_targets=["demo-nli"],
                                  data_dir=str(SAMPLE), task_defs=[str(refined / "tasks")]))
