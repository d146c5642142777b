"""`mtbio export`: a task of a run becomes an AutoModelFor* directory that plain transformers loads, in a
fresh process, with the labels, the same predictions as mtbio and a model card."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from mtbio import cli
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.finetune import finetune
from mtbio.training.config import RunConfig

DEFS = str(SAMPLE_DIR / "task_defs")


def _train(tmp_path: Path, encoder: str, task: str, task_defs: list[str]) -> Path:
    config = RunConfig(tasks=[task], task_defs=task_defs, data_dir=str(SAMPLE_DIR), encoder=encoder, max_steps=30,
                       batch_size=16, lr=1e-3, max_length=48, output=str(tmp_path / "run"), mixed_precision="no")
    [(run_dir, _)] = finetune(config)
    return run_dir


def test_tagging_task_exports_to_a_token_classifier_that_pipeline_loads(tmp_path: Path, tiny_encoder: str) -> None:
    run_dir = _train(tmp_path, tiny_encoder, "demo-ner", [DEFS])
    out = tmp_path / "export"
    result = CliRunner().invoke(cli.main, ["export", str(run_dir), "--task", "demo-ner", "--output", str(out)])
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"]["0"] == "O" and "B-Chemical" in config["label2id"]
    card = (out / "README.md").read_text()
    assert "AutoModelForTokenClassification" in card and "entity_f1" in card and tiny_encoder in card
    from huggingface_hub import ModelCard

    parsed = ModelCard.load(out / "README.md")  # the metadata block parses, and lists the run's dev metrics
    dev_score = json.loads((run_dir / "results.json").read_text())["dev"]["demo-ner"]["entity_f1"]
    [result] = parsed.data.eval_results
    assert result.metric_type == "entity_f1" and result.metric_value == dev_score and parsed.data.pipeline_tag
    words = ["Aspirin", "relieved", "the", "headache", "."]
    mtbio_tags = __import__("mtbio").load(run_dir).predict("demo-ner", [words])[0]
    # a fresh process with no mtbio import: transformers alone
    script = (f"import json; from transformers import AutoModelForTokenClassification, AutoTokenizer\n"
              f"m = AutoModelForTokenClassification.from_pretrained({str(out)!r}).eval()\n"
              f"t = AutoTokenizer.from_pretrained({str(out)!r})\n"
              f"e = t({words!r}, is_split_into_words=True, return_tensors='pt')\n"
              f"ids = m(**e).logits[0].argmax(-1).tolist(); seen = set(); tags = []\n"
              f"for i, w in enumerate(e.word_ids()):\n"
              f"    if w is not None and w not in seen: seen.add(w); tags.append(m.config.id2label[ids[i]])\n"
              f"print(json.dumps(tags))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == mtbio_tags


def test_sentence_task_exports_through_the_pooler_and_cls_heads_through_a_linear_pooler(tmp_path: Path, tiny_encoder: str) -> None:
    defs = tmp_path / "defs"
    defs.mkdir()
    text = (SAMPLE_DIR / "task_defs" / "demo-relation.yml").read_text()
    (defs / "demo-relation.yml").write_text(text + "pooling: pooler\n")
    run_dir = _train(tmp_path, tiny_encoder, "demo-relation", [str(defs)])
    out = tmp_path / "export"
    result = CliRunner().invoke(cli.main, ["export", str(run_dir), "--task", "demo-relation", "--output", str(out)])
    assert result.exit_code == 0, result.output
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(out))
    sentence = "@DRUG$ increases the plasma concentration of @DRUG$ ."
    expected = __import__("mtbio").load(run_dir).predict("demo-relation", [sentence])[0]
    assert classify(sentence)[0]["label"] == expected
    assert json.loads((out / "config.json").read_text())["problem_type"] == "single_label_classification"

    before = sorted((p.name, p.stat().st_size) for p in out.iterdir())
    offline = CliRunner().invoke(cli.main, ["export", str(run_dir), "--task", "demo-relation", "--output", str(out),
                                            "--push-to-hub", "someone/mtbio-demo-relation"],
                                 env={"HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_not_a_real_token"})
    assert offline.exit_code == 2 and "push to the hub failed" in offline.output and "complete and unchanged" in offline.output
    assert len([line for line in offline.output.splitlines() if line.startswith("error:")]) == 1
    assert sorted((p.name, p.stat().st_size) for p in out.iterdir()) == before

    cls_run = _train(tmp_path / "cls", tiny_encoder, "demo-relation", [DEFS])  # pooling: cls rides the pooler
    cls_out = tmp_path / "cls-export"
    carried = CliRunner().invoke(cli.main, ["export", str(cls_run), "--task", "demo-relation", "--output", str(cls_out)])
    assert carried.exit_code == 0, carried.output
    expected = __import__("mtbio").load(cls_run).predict("demo-relation", [sentence])[0]
    assert pipeline("text-classification", model=str(cls_out))(sentence)[0]["label"] == expected


def test_predict_gives_entity_spans_that_slice_the_raw_text_and_probabilities(tmp_path: Path, tiny_encoder: str) -> None:
    """Irregular spacing and punctuation: every entity's [start:end] is its surface text; --scores adds probabilities."""
    config = RunConfig(tasks=["demo-ner"], task_defs=[DEFS], data_dir=str(SAMPLE_DIR), encoder=tiny_encoder,
                       epochs=4, batch_size=16, lr=3e-3, max_length=48, output=str(tmp_path / "run"),
                       mixed_precision="no", seed=1)
    [(run_dir, _)] = finetune(config)
    text = "Chronic  administration of   lithium,produced  neutropenia and\tepilepsy in mice ( tacrolimus )."
    (tmp_path / "in.txt").write_text(text + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli.main, ["predict", str(run_dir), "--task", "demo-ner", "--input",
                                           str(tmp_path / "in.txt"), "--output", str(out), "--scores"])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert record["words"][:5] == ["Chronic", "administration", "of", "lithium", ","]
    assert len(record["prediction"]) == len(record["words"]) == len(record["scores"])
    assert all(0.0 < p <= 1.0 for p in record["scores"])
    assert record["entities"], "the tiny model found no entity at all"
    for entity in record["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"] and entity["type"] in ("Chemical", "Disease")
        assert 0.0 < entity["score"] <= 1.0
    found = {e["text"] for e in record["entities"]}
    assert found & {"lithium", "tacrolimus", "neutropenia", "epilepsy"}


def test_tag_spans_read_iob2_io_and_iobes() -> None:
    from mtbio.kinds.tagging import tag_spans
    from mtbio.tasks.shapes import split_words

    assert tag_spans(["B-C", "I-C", "O", "I-D", "B-D", "B-D"]) == [("C", 0, 1), ("D", 3, 3), ("D", 4, 4), ("D", 5, 5)]
    assert tag_spans(["S-C", "B-D", "I-D", "E-D", "O"]) == [("C", 0, 0), ("D", 1, 3)]
    assert tag_spans(["I-C", "I-C", "I-D"]) == [("C", 0, 1), ("D", 2, 2)]
    assert split_words("Na+/K+-ATPase, ok") == [("Na", 0, 2), ("+", 2, 3), ("/", 3, 4), ("K", 4, 5), ("+", 5, 6),
                                               ("-", 6, 7), ("ATPase", 7, 13), (",", 13, 14), ("ok", 15, 17)]
