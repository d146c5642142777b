"""Shipped task definitions load and read; invalid definitions fail naming file, task and field."""
from __future__ import annotations

from pathlib import Path

import pytest

from mtbio.data.loading import read_split
from mtbio.errors import MissingDataError, MtbioError, TaskDefinitionError
from mtbio.tasks.loading import BUILTIN_TASK_DEFS, load_catalog, load_task_def

BLURB = ["bc5cdr-chem", "bc5cdr-disease", "ncbi-disease", "bc2gm", "jnlpba", "ebm-pico", "chemprot", "ddi", "gad",
         "biosses", "hoc", "pubmedqa", "bioasq"]
CLINICAL = ["clinicalsts", "i2b2-2010", "mednli", "shareclefe"]
PUBLIC_CLINICAL = ["nli4ct", "mediqa-rqe", "mqp", "ade", "chia"]
ENTITY_MARKER_VARIANTS = ["chemprot-entities", "ddi-entities"]  # BLURB relation sets read by the entity_relation kind
BI_ENCODER_VARIANTS = ["biosses-bi", "mqp-bi", "mediqa-rqe-bi"]  # pairs read by the bi_encoder and
# cosine_classification kinds (each text encoded on its own)
CONTRASTIVE_VARIANTS = ["mqp-mnrl", "mediqa-rqe-mnrl"]  # positive pairs read by the contrastive_pair kind

VALID = """\
name: demo
type: classification
format: tsv
columns: {text: 0, label: 1}
files: {train: demo/train.tsv}
labels: [pos, neg]
negative_label: neg
metric: micro_f1
"""


def test_every_shipped_definition_loads():
    paths = sorted(p for p in BUILTIN_TASK_DEFS.glob("*.yml") if p.name != "domains.yml")
    names = [load_task_def(p).name for p in paths]
    assert names == [p.stem for p in paths]  # one file per task, named after it
    assert set(names) == set(BLURB + CLINICAL + PUBLIC_CLINICAL + ENTITY_MARKER_VARIANTS + BI_ENCODER_VARIANTS
                          + CONTRASTIVE_VARIANTS)


def test_domains_and_alias_resolve():
    catalog = load_catalog()
    assert [t.name for t in catalog.resolve(domain="biomedical")] == ["chemprot", "ddi", "bc5cdr-disease", "bc5cdr-chem"]
    assert [t.name for t in catalog.resolve(domain="clinical")] == CLINICAL
    assert [t.name for t in catalog.resolve(domain="blurb")] == BLURB
    public = catalog.resolve(domain="clinical-public")
    assert sorted(t.category for t in public) == ["ner", "nli", "relation", "similarity"]
    assert [t.name for t in catalog.resolve(["bc5cdr"])] == ["bc5cdr-disease", "bc5cdr-chem"]
    assert [t.name for t in catalog.resolve(["bc5cdr", "bc5cdr-chem", "ddi"])] == ["bc5cdr-disease", "bc5cdr-chem", "ddi"]
    with pytest.raises(MtbioError, match="unknown domain 'nope'"):
        catalog.resolve(domain="nope")


def test_benchmark_conventions():
    catalog = load_catalog()
    for name in CLINICAL:
        task = catalog.get(name)
        assert task.credentialed and task.access and task.domain == "clinical"
    metric = {t.name: t.metric for t in catalog.tasks.values()}
    assert {metric[n] for n in ["bc5cdr-chem", "bc5cdr-disease", "ncbi-disease", "bc2gm", "jnlpba", "shareclefe"]} == {"entity_f1"}
    assert metric["ebm-pico"] == "token_macro_f1" and metric["hoc"] == "hoc_f1"
    assert metric["biosses"] == metric["clinicalsts"] == "pearson"
    assert metric["pubmedqa"] == metric["bioasq"] == metric["mednli"] == "accuracy"
    assert catalog.get("ddi").negative_label == "DDI-false" and catalog.get("gad").negative_label == "0"
    assert catalog.get("i2b2-2010").negative_label == "false"
    assert catalog.get("chemprot").label_map["INDIRECT-DOWNREGULATOR"] == "CPR:4"
    for name in ["ade", "mqp", "chia"]:
        assert catalog.get(name).derived_split is not None


def test_every_shipped_definition_reads_its_fixture_data(fixtures_dir: Path):
    """Each task's reader, columns and labels work on a tiny file in the task's own format."""
    data = fixtures_dir / "data"
    for task in load_catalog().tasks.values():
        for split in task.has_splits:
            if task.name == "ebm-pico" and split == "train":
                with pytest.raises(MissingDataError):
                    read_split(task, split, data)
                continue
            examples = read_split(task, split, data)
            assert examples or task.derived_split is not None, (task.name, split)


# ---- invalid definitions ------------------------------------------------------------------------


def _errors(tmp_path: Path, text: str) -> list[TaskDefinitionError]:
    path = tmp_path / "demo.yml"
    path.write_text(text)
    with pytest.raises(TaskDefinitionError) as info:
        load_task_def(path)
    return getattr(info.value, "errors", [info.value])


@pytest.mark.parametrize(
    "change, field, message",
    [
        ("metric: micro_f1\nmetric: accuracy\n", "metric", "duplicate key 'metric' (first at line 8)"),
        ("lables: [a]\n", "lables", "Extra inputs are not permitted"),
        ("label_map: {positive: good}\n", "label_map", "maps 'positive' to 'good', which is not in labels"),
        ("negative_label: neutral\n", "negative_label", "'neutral' is not in labels"),
        ("max_length: long\n", "max_length", "valid integer"),
        ("type: ranking\n", "type", "unknown task type 'ranking'"),
        ("format: xml\n", "format", "unknown format 'xml'"),
        ("extra_metrics: [f2]\n", "extra_metrics", "unknown metric 'f2'"),
        ("tagging_scheme: IOB2\n", "tagging_scheme", "applies to tasks that tag words only"),
        ("pooling: max\n", "pooling", "unknown pooling 'max' (registered: cls, mean, pooler)"),
        ("files: {all: demo/all.tsv}\n", "derived_split", "needs derived_split"),
        ("reader_options: {sep: ';'}\n", "reader_options.sep", "has no option 'sep'"),
        ("reader_options: {header: 'yes'}\n", "reader_options.header", "expected bool"),
    ],
)
def test_invalid_definition_names_file_task_and_field(tmp_path, change, field, message):
    text = VALID
    key = change.split(":", 1)[0]
    if key not in ("metric", "lables"):  # replace the line of that key (or append it)
        text = "\n".join(line for line in VALID.splitlines() if not line.startswith(f"{key}:")) + "\n"
    errors = _errors(tmp_path, text + change)
    assert any(e.field == field and message in e.message for e in errors), [str(e) for e in errors]
    for e in errors:
        assert e.path.endswith("demo.yml") and e.task == "demo"
        assert str(e).startswith(f"{e.path}: task 'demo': field '")


def test_pooler_is_refused_for_a_tagging_task(tmp_path):
    tagging = VALID.replace("type: classification", "type: tagging").replace("format: tsv", "format: conll")
    tagging = tagging.replace("columns: {text: 0, label: 1}\n", "").replace("negative_label: neg\n", "")
    tagging = tagging.replace("labels: [pos, neg]", "labels: [Chemical]").replace("micro_f1", "entity_f1")
    errors = _errors(tmp_path, tagging + "tagging_scheme: IOB2\npooling: pooler\n")
    assert [(e.field, "sentence-level tasks" in e.message) for e in errors] == [("pooling", True)], errors


def test_all_schema_problems_reported_at_once(tmp_path):
    errors = _errors(tmp_path, VALID + "lables: [a]\nmax_length: long\n")
    assert sorted(e.field for e in errors) == ["lables", "max_length"]


def test_columns_must_suit_the_reader(tmp_path):
    text = VALID.replace("columns: {text: 0, label: 1}", "columns: {sentence: 0, label: 1}")
    fields = {e.field for e in _errors(tmp_path, text)}
    assert fields == {"columns.sentence", "columns"}  # unknown column, and the required text column is missing


def test_missing_data_names_task_and_where_to_put_it(tmp_path):
    catalog = load_catalog()
    with pytest.raises(MissingDataError, match=r"task 'mednli': train data missing: put it at .*MedNLI/mli_train_v1\.jsonl; "
                                               r"credentialed PhysioNet"):
        read_split(catalog.get("mednli"), "train", tmp_path)


def test_task_defs_from_extra_directory(tmp_path, monkeypatch, fixtures_dir):
    monkeypatch.setenv("MTBIO_TASK_DEFS", str(fixtures_dir / "user_dataset" / "defs"))
    catalog = load_catalog()
    assert {"smoking-status", "question-paraphrase", "note-similarity", "medications"} <= set(catalog.tasks)
    dup = tmp_path / "defs"
    dup.mkdir()
    (dup / "ddi.yml").write_text((BUILTIN_TASK_DEFS / "ddi.yml").read_text())
    with pytest.raises(TaskDefinitionError, match="also defined in"):
        load_catalog([dup])
