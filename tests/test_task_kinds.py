"""Task kinds as one registered unit each: the registry, the rule that no module outside a kind's own
file names a kind, and the entity-marker relation kind end to end on real ChemProt and DDI slices."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from pydantic import ValidationError

from mtbio.cli import main
from mtbio.data.example import Example
from mtbio.data.featurize import featurize
from mtbio.errors import DataFormatError
from mtbio.model.heads import HeadConfig, build_head
from mtbio.tasks.kinds import TASK_KINDS, kind_names, task_kind
from mtbio.tasks.loading import load_catalog
from mtbio.tasks.schema import TaskDef

PACKAGE = Path(__file__).resolve().parent.parent / "mtbio"


def _string_constants(path: Path) -> set[str]:
    """String constants of a module's code, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_no_module_outside_the_kinds_names_a_kind() -> None:
    named = {str(path.relative_to(PACKAGE)): sorted(_string_constants(path) & set(kind_names()))
             for path in PACKAGE.rglob("*.py") if "kinds" not in path.relative_to(PACKAGE).parts}
    assert {path: names for path, names in named.items() if names} == {}


def test_the_shipped_kinds_are_registered_and_a_type_is_checked_against_them() -> None:
    assert kind_names() == ["bi_encoder", "classification", "contrastive_pair", "cosine_classification",
                            "cosine_regression",
                            "entity_relation", "multilabel", "regression", "span_extraction", "tagging"]
    with pytest.raises(ValidationError, match="unknown task type 'ordinal' \\(known: bi_encoder, classification"):
        TaskDef(name="x", type="ordinal", format="tsv", files={"train": "a"}, metric="accuracy")
    regression = TaskDef(name="x", type="regression", format="tsv", files={"train": "a"})
    assert regression.metric == "pearson"  # the kind's default metric where the definition names none


def test_a_metric_that_cannot_score_the_kind_is_refused_when_the_definition_loads(tmp_path: Path) -> None:
    from mtbio.tasks.loading import load_task_def

    path = tmp_path / "x.yml"
    path.write_text("name: x\ntype: entity_relation\ntype_options: {markers: ['<<', '[[']}\nformat: tsv\n"
                    "columns: {text: 0, label: 1}\nfiles: {train: a.tsv}\nlabels: [a, b]\nmetric: pearson\n")
    with pytest.raises(Exception, match="metric 'pearson' scores labels that are a number; a entity_relation task's"):
        load_task_def(path)


def test_type_options_are_checked_by_the_kind() -> None:
    base = {"name": "x", "format": "tsv", "files": {"train": "a"}, "labels": ["a", "b"]}
    with pytest.raises(ValidationError, match="type_options.markers: Field required"):
        TaskDef(type="entity_relation", **base)
    with pytest.raises(ValidationError, match="type_options: a classification task takes no type_options"):
        TaskDef(type="classification", type_options={"markers": ["<<", "[["]}, **base)
    with pytest.raises(ValidationError, match="entity_markers: an entity_relation task reads its markers"):
        TaskDef(type="entity_relation", type_options={"markers": ["<<", "[["]}, entity_markers="strip", **base)


@pytest.fixture(scope="module")
def tokenizer():
    from mtbio.model.encoder import load_tokenizer

    return load_tokenizer("minilm")


def _task(markers: list[str], **fields) -> TaskDef:
    return TaskDef(name="rel", type="entity_relation", type_options={"markers": markers, **fields}, format="tsv",
                   files={"train": "a"}, labels=["no", "yes"])


def test_entity_positions_are_the_tokens_where_the_markers_start(tokenizer) -> None:
    examples = [Example("1", "yes", text="<< aspirin >> blocks [[ COX-2 ]] ."),
                Example("2", "no", text="@DRUG$ and @DRUG$ together .")]
    chemprot = featurize(examples[:1], _task(["<<", "[["]), tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(chemprot["input_ids"][0])
    first, second = chemprot["entity_positions"][0]
    assert tokens[first] == "<" and tokens[first - 1] == "[CLS]"
    assert tokens[second] == "[" and tokens[second - 1] == "blocks"
    ddi = featurize(examples[1:], _task(["@DRUG$", "@DRUG$"]), tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(ddi["input_ids"][0])
    first, second = ddi["entity_positions"][0]
    assert (tokens[first], tokens[second]) == ("@", "@") and first == 1 and tokens[second - 1] == "and"


def test_a_text_without_its_markers_is_an_error_unless_missing_reads_cls(tokenizer) -> None:
    example = [Example("7", "no", text="@DRUG-DRUG$ should not be given .", origin="ddi/train.tsv:7")]
    with pytest.raises(DataFormatError, match=r"^ddi/train.tsv:7.*does not hold both entity markers"):
        featurize(example, _task(["@DRUG$", "@DRUG$"]), tokenizer)
    assert featurize(example, _task(["@DRUG$", "@DRUG$"], missing="cls"), tokenizer)["entity_positions"] == [[0, 0]]
    cut = [Example("8", "no", text="<< a >> " + "word " * 40 + "[[ b ]]")]
    assert featurize(cut, _task(["<<", "[["]), tokenizer, max_length=16)["entity_positions"] == [[1, 0]]


def test_the_head_reads_only_the_two_entity_positions() -> None:
    torch.manual_seed(0)
    head = build_head(HeadConfig(task="rel", type="entity_relation", hidden_size=8, labels=["no", "yes"])).eval()
    hidden = torch.randn(2, 6, 8)
    batch = {"entity_positions": torch.tensor([[1, 4], [2, 3]])}
    logits = head(hidden, None, batch)
    changed = hidden.clone()
    changed[0, [0, 2, 3, 5]] += 5.0  # everything but example 0's entity starts
    assert torch.allclose(head(changed, None, batch)[0], logits[0])
    changed[0, 4] += 1.0
    assert not torch.allclose(head(changed, None, batch)[0], logits[0])
    assert head.out.in_features == 16


def test_entity_relation_trains_predicts_and_is_refused_by_export(tmp_path: Path, data_dir: Path, tiny_encoder: str) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["refine", "--tasks", "chemprot-entities,ddi-entities", "--encoder", tiny_encoder,
                                       "--data-dir", str(data_dir), "--max-train-examples", "48",
                                       "--max-eval-examples", "32", "--epochs", "1", "--batch-size", "8",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert set(results["dev"]) == {"chemprot-entities", "ddi-entities"}
    assert json.loads((out / "heads" / "chemprot-entities" / "head_config.json").read_text())["type"] == "entity_relation"
    code = ("import mtbio, json; run = mtbio.load(%r); "
            "print(json.dumps(run.predict('chemprot-entities', ['<< Aspirin >> inhibits [[ COX-2 ]] .'])))" % str(out))
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(fresh.stdout.strip().splitlines()[-1])[0] in ["CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]
    refused = CliRunner().invoke(main, ["export", str(out), "--task", "chemprot-entities", "--output", str(tmp_path / "x")])
    assert refused.exit_code != 0 and "no transformers class carries the head" in refused.output


def test_the_shipped_entity_tasks_match_their_classification_twins_and_the_docs() -> None:
    import re

    import yaml

    catalog = load_catalog()
    page = (PACKAGE.parent / "docs" / "task_definitions.md").read_text()
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if "type: entity_relation" in b]
    assert yaml.safe_load(block)["type_options"]["markers"] == list(catalog.resolve(["chemprot-entities"])[0]
                                                                      .type_options["markers"])
    for name, twin in (("chemprot-entities", "chemprot"), ("ddi-entities", "ddi")):
        ours, theirs = catalog.resolve([name])[0], catalog.resolve([twin])[0]
        assert ours.kind is TASK_KINDS.get("entity_relation") and theirs.kind is task_kind("classification")
        same = ("files", "labels", "negative_label", "metric", "max_length", "format")
        assert all(getattr(ours, f) == getattr(theirs, f) for f in same)


def test_the_task_definition_reference_names_every_registered_kind() -> None:
    """docs/task_definitions.md's `type` row lists the kinds the registry holds (a new kind's module is not enough)."""
    row = next(line for line in (PACKAGE.parent / "docs" / "task_definitions.md").read_text().splitlines()
               if line.startswith("| `type` |"))
    assert [name for name in kind_names() if f"`{name}`" not in row] == []


@pytest.mark.parametrize("kind, extra", [("bi_encoder", "type_options: {label_range: [0, 5]}\n"),
                                         ("cosine_regression", ""),
                                         ("cosine_classification", "labels: [entailment, neutral]\n"),
                                         ("contrastive_pair", "labels: [entailment, neutral]\n"
                                                              "type_options: {positive: entailment}\n")])
def test_each_kind_encoding_a_pairs_texts_on_their_own_names_itself_when_the_second_text_is_missing(
        kind: str, extra: str, tmp_path: Path) -> None:
    path = tmp_path / "pairs.yml"
    path.write_text(f"name: pairs\ntype: {kind}\ndomain: demo\nformat: jsonl\n"
                    "columns: {id: pairID, text: sentence1, label: gold_label}\n"
                    f"files: {{train: nli/train.jsonl, dev: nli/dev.jsonl}}\n{extra}")
    result = CliRunner().invoke(main, ["tasks", "check", str(path)])
    assert result.exit_code != 0
    assert (f"task 'pairs': field 'columns': a {kind} task reads a pair of texts; name the second in "
            "columns: {text_b: ...}") in result.output
