"""`mtbio export`: one task of a run as a standard Hugging Face directory that loads without mtbio.

    AutoModelForTokenClassification.from_pretrained(DIR)      # tagging tasks
    AutoModelForSequenceClassification.from_pretrained(DIR)   # sentence tasks read through the pooler
    pipeline("token-classification", model=DIR)

The directory holds `config.json` (with `id2label` / `label2id`, `problem_type`), the weights
(safetensors), the tokenizer and a model card (`README.md`: base model, task, data, scores, how to
load). The exported model computes exactly what mtbio's head computes, and the export checks that:
it reloads the directory and compares logits with the run's model on the task's own inputs.

What maps exactly: a tagging head (every token → dropout → linear) is the `classifier` of
`*ForTokenClassification`; a sentence head with `pooling: pooler` (pooler → dropout → linear) is the
`classifier` of a pooler-based `*ForSequenceClassification` (BERT, ELECTRA-style pooler heads differ
and are refused). A head that reads [CLS] directly (`pooling: cls`, MT-BERT's default) has no
standard class that computes the same thing, so it is refused with that explanation.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
import yaml

from mtbio.errors import MtbioError
from mtbio.experiments.predict import load_run
from mtbio.training.results import is_finished, read_results

PROBLEM_TYPES = {"classification": "single_label_classification", "multilabel": "multi_label_classification",
                 "regression": "regression"}


def export_task(run_dir: Path, task: str, output: Path, sample_inputs: list[Any] | None = None) -> Path:
    """Write `task` of the run in `run_dir` to `output` as an `AutoModelFor*` directory with a model card."""
    from transformers import (
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    run = load_run(run_dir)
    if task not in run.model.heads:
        raise MtbioError(f"{run_dir}: no task '{task}' (tasks: {', '.join(run.model.heads)})")
    head, definition = run.model.heads[task], run.tasks[task]
    cfg = head.config
    config = copy.deepcopy(run.model.encoder.config)
    labels = list(cfg.labels) if cfg.type != "regression" else ["score"]
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    config.num_labels = len(labels)
    auto = AutoModelForTokenClassification if cfg.type == "tagging" else AutoModelForSequenceClassification
    if cfg.type != "tagging":
        config.problem_type = PROBLEM_TYPES[cfg.type]
    model = auto.from_config(config)
    _copy_weights(model, run.model.encoder, head, task)
    if cfg.type != "tagging" and cfg.pooling == "cls":
        _carry_cls_head(model, task)
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output)
    run.tokenizer.save_pretrained(output)
    _check_same_logits(output, auto, run, task, sample_inputs or _sample_inputs(definition))
    (output / "README.md").write_text(model_card(run_dir, task, definition, auto.__name__))
    return output


def push_to_hub(output: Path, repo_id: str) -> str:
    """Upload an exported directory with huggingface_hub (the library's own calls; a token from
    `hf auth login` or HF_TOKEN). A failure is one line and leaves the export as it is."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=str(output), commit_message="mtbio export")
    except Exception as exc:  # noqa: BLE001 (network, auth, offline: all one line for the user)
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise MtbioError(f"push to the hub failed ({type(exc).__name__}: {reason}); the export in {output} is "
                         "complete and unchanged") from None
    return str(getattr(commit, "commit_url", repo_id))


def _copy_weights(model: Any, encoder: Any, head: Any, task: str) -> None:
    base = model.base_model
    missing, unexpected = base.load_state_dict(encoder.state_dict(), strict=False)
    unexpected = [k for k in unexpected if not k.startswith("pooler.")]  # token classifiers drop the pooler
    missing = [k for k in missing if not k.startswith("pooler.")]  # a cls head does not need the encoder's pooler
    if missing or unexpected:
        raise MtbioError(f"task '{task}': the encoder's weights do not fit {type(model).__name__} "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    classifier = getattr(model, "classifier", None)
    if not isinstance(classifier, torch.nn.Linear) or classifier.weight.shape != head.out.weight.shape:
        raise MtbioError(f"task '{task}': {type(model).__name__} has no plain linear classifier to hold the head "
                         "(its architecture adds layers of its own); this encoder family cannot be exported exactly")
    classifier.load_state_dict(head.out.state_dict())


CLS_EPSILON = 1e-4


def _carry_cls_head(model: Any, task: str) -> None:
    """Make the pooler (dense → tanh) pass [CLS] through linearly: dense = ε·I, bias 0, classifier weights ×1/ε.

    tanh(εx)/ε = x − ε²x³/3 + …, so with ε = 1e-4 and |x| ≲ 20 each feature is off by < 3e-6; the 1e-4 logit
    check after saving measures the real difference. BERT-family sequence classifiers always apply this pooler
    (no config switch turns it off), and no standard class for BERT weights reads [CLS] bare, so this is the exact
    way to carry a `pooling: cls` head."""
    pooler = getattr(model.base_model, "pooler", None)
    dense = getattr(pooler, "dense", None)
    if not isinstance(dense, torch.nn.Linear) or not isinstance(getattr(pooler, "activation", None), torch.nn.Tanh):
        raise MtbioError(f"task '{task}' reads [CLS] directly (pooling: cls), and {type(model).__name__} has no "
                         "dense + tanh pooler to carry that head exactly; train it with `pooling: pooler`")
    with torch.no_grad():
        dense.weight.copy_(torch.eye(dense.out_features, dense.in_features) * CLS_EPSILON)
        dense.bias.zero_()
        model.classifier.weight.mul_(1.0 / CLS_EPSILON)


def _sample_inputs(definition: Any) -> list[Any]:
    from mtbio.data.readers import is_pair_task

    if definition.type == "tagging":
        return [["Aspirin", "reduced", "the", "risk", "of", "myocardial", "infarction", "."]]
    if is_pair_task(definition):
        return [("The patient denies chest pain.", "The patient has chest pain.")]
    return ["Inhibition of the kinase by the compound reduced tumour growth."]


def _check_same_logits(output: Path, auto: Any, run: Any, task: str, inputs: list[Any]) -> None:
    """Reload the export and compare its logits with the run's head on `inputs` (eval mode)."""
    device = next(run.model.parameters()).device
    exported = auto.from_pretrained(output).to(device).eval()
    tokenizer = run.tokenizer
    for item in inputs:
        if isinstance(item, list):
            encoded = tokenizer(item, is_split_into_words=True, return_tensors="pt")
        elif isinstance(item, tuple):
            encoded = tokenizer(*item, return_tensors="pt")
        else:
            encoded = tokenizer(item, return_tensors="pt")
        encoded = {k: v.to(device) for k, v in encoded.items()}
        with torch.no_grad():
            ours = run.model(task, **encoded).logits.float()
            theirs = exported(**encoded).logits.float()
        if ours.shape != theirs.shape or not torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4):
            raise MtbioError(f"task '{task}': the exported model's logits differ from the run's "
                             f"(max |Δ| {float((ours - theirs).abs().max()):.2e}); nothing to rely on was written")


def model_card(run_dir: Path, task: str, definition: Any, auto_class: str) -> str:
    """README.md for the exported directory: what it is, what it was trained on, its scores, how to load it."""
    results = read_results(run_dir) if is_finished(run_dir) else {}
    config = (run_dir / "config.yaml").read_text() if (run_dir / "config.yaml").is_file() else ""
    settings = yaml.safe_load(config) or {}
    encoder = results.get("encoder_source") or settings.get("encoder") or "the packaged MiniLM-L6 (sentence-transformers/all-MiniLM-L6-v2)"
    scores = []
    for split in ("dev", "test"):
        for metric, value in (results.get(split, {}).get(task) or {}).items():
            scores.append(f"| {split} | {metric} | {value:.4f} |")
    score_table = "\n".join(["| split | metric | value |", "|---|---|---|", *scores]) if scores else "(no scores saved)"
    others = [t for t in results.get("tasks", []) if t != task]
    trained = (f"jointly with {', '.join(others)} (multi-task refinement, one shared encoder)" if others
               else "on this task alone" if results.get("stage") == "single-task"
               else f"as stage '{results.get('stage', 'unknown')}'")
    pipeline_task = "token-classification" if definition.type == "tagging" else "text-classification"
    metadata = {"library_name": "transformers", "pipeline_tag": pipeline_task, "tags": ["mtbio", "biomedical"],
                "model-index": [{"name": f"mtbio-{task}", "results": [
                    {"task": {"type": pipeline_task},
                     "dataset": {"name": f"{definition.name} ({split})", "type": definition.name, "split": split},
                     "metrics": [{"type": metric, "value": float(value), "name": f"{split} {metric}"}
                                 for metric, value in (results.get(split, {}).get(task) or {}).items()]}
                    for split in ("dev", "test") if results.get(split, {}).get(task)]}]}
    return f"""---
{yaml.safe_dump(metadata, sort_keys=False).strip()}
---

# {task}: {definition.description or definition.name}

Exported by `mtbio export` from the run `{run_dir}`. It loads without mtbio:

```python
from transformers import {auto_class}, AutoTokenizer, pipeline
model = {auto_class}.from_pretrained("PATH")
nlp = pipeline("{pipeline_task}", model="PATH")
```

- **Base model:** {encoder}
- **Task:** {definition.name} ({definition.type}; labels: {', '.join(definition.label_list) or 'a score'}), metric
  `{definition.metric}`.
- **Trained** {trained}; stage `{results.get('stage', 'unknown')}`, {results.get('steps', '?')} optimizer steps, best dev
  at step {results.get('best_step', '?')}; learning rate {settings.get('lr') or 'the stage default'}, batch size
  {settings.get('batch_size', '?')}, seed {settings.get('seed', '?')}, training examples per task
  {settings.get('max_train_examples') or 'all'}.
- **Data:** {definition.citation or definition.name}. {('Access: ' + definition.access) if definition.access else ''}

## Scores (from the run's results.json)

{score_table}

## Limits

Scores are on the splits named above, with this run's data and settings; they say nothing about other text. The
model was trained for research on biomedical text mining; it is not a medical device and its output is not medical
advice.
"""
