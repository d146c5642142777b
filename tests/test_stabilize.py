"""Fine-tuning stabilization and layer removal on tiny random BERT, RoBERTa, DeBERTa-v2 and ELECTRA models."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (AlbertConfig, AlbertModel, AutoModel, BertConfig, BertModel, DebertaV2Config, DebertaV2Model,
                          ElectraConfig, ElectraModel, RobertaConfig, RobertaModel)

from mtbio.errors import MtbioError
from mtbio.model.heads import HeadConfig, build_head
from mtbio.model.layers import encoder_layout
from mtbio.model.multitask import MultiTaskModel
from mtbio.training import checkpoint as ckpt
from mtbio.training.config import RunConfig, build_config
from mtbio.training.optim import build_optimizer, build_scheduler, parameter_groups
from mtbio.training.stabilize import AdamWNoBiasCorrection, apply_layer_options

SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)
FAMILIES = {
    "bert": (BertConfig, BertModel, {}),
    "roberta": (RobertaConfig, RobertaModel, {}),
    "deberta-v2": (DebertaV2Config, DebertaV2Model, {"relative_attention": True, "pos_att_type": ["p2c", "c2p"]}),
    "electra": (ElectraConfig, ElectraModel, {"embedding_size": 16}),
}


def _pretrained(family: str, directory: Path) -> Any:
    """A tiny random model saved and loaded back, as a pretrained encoder is."""
    config_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(0)
    model_cls(config_cls(**SIZES, **extra)).save_pretrained(directory)
    return AutoModel.from_pretrained(directory)


def _multitask(encoder: Any) -> MultiTaskModel:
    head = build_head(HeadConfig(task="t", type="classification", hidden_size=32, labels=["a", "b"], dropout=0.0))
    return MultiTaskModel(encoder, {"t": head})


def _step(model: MultiTaskModel, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.randint(3, 100, (4, 8))
    out = model("t", labels=torch.tensor([0, 1, 0, 1]), input_ids=ids, attention_mask=torch.ones_like(ids))
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_layers_and_embeddings_are_found_by_structure(family: str, tmp_path: Path) -> None:
    encoder = _pretrained(family, tmp_path)
    layout = encoder_layout(encoder)
    assert layout.num_layers == 3 and layout.layers is encoder.encoder.layer
    embedding_params = {n for n, _ in encoder.embeddings.named_parameters(prefix="embeddings")}
    assert embedding_params and all(layout.depth[n] == 0 for n in embedding_params)
    for i in range(3):
        names = [n for n, _ in encoder.encoder.layer[i].named_parameters(prefix=f"encoder.layer.{i}")]
        assert names and all(layout.depth[n] == i + 1 for n in names)
    if family == "electra":  # the projection runs before the first layer: part of the embedding stage
        assert layout.depth["embeddings_project.weight"] == 0
    if family == "bert":  # the pooler runs after the top layer
        assert layout.depth["pooler.dense.weight"] == 3
    if family == "deberta-v2":  # relative-position embeddings are read by every layer: an input
        assert layout.depth["encoder.rel_embeddings.weight"] == 0


def test_unsupported_architectures_fail_clearly() -> None:
    albert = AlbertModel(AlbertConfig(vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                                      num_attention_heads=2, intermediate_size=64))
    with pytest.raises(MtbioError, match="not supported by the layer options"):
        encoder_layout(albert)
    with pytest.raises(MtbioError, match="not supported"):
        apply_layer_options(albert, RunConfig(freeze_layers=1))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_frozen_parameters_do_not_change_after_a_step(family: str, tmp_path: Path) -> None:
    encoder = _pretrained(family, tmp_path)
    apply_layer_options(encoder, RunConfig(freeze_layers=1))
    model = _multitask(encoder)
    layout = encoder_layout(encoder)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = build_optimizer(parameter_groups(model, 0.01), "adamw", 1e-3)
    _step(model, optimizer)
    for name, param in model.named_parameters():
        inner = name.removeprefix("encoder.")
        depth = layout.depth.get(inner) if name.startswith("encoder.") else None
        if depth is not None and depth <= 1:
            assert not param.requires_grad and torch.equal(param, before[name]), name
    changed = [n for n, p in model.named_parameters() if n.startswith(("encoder.encoder.layer.2.", "heads."))
               and p.ndim >= 2 and not torch.equal(p, before[n])]
    assert any(n.startswith("heads.") for n in changed) and any("layer.2." in n for n in changed)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_layerwise_learning_rates_follow_gamma(family: str, tmp_path: Path) -> None:
    model = _multitask(_pretrained(family, tmp_path))
    layout = encoder_layout(model.encoder)
    lr, gamma = 1e-3, 0.5
    groups = parameter_groups(model, 0.01, lr, gamma)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    decay = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    assert len(rate) == sum(1 for _ in model.parameters())
    for name, param in model.named_parameters():
        if name.startswith("heads."):
            assert rate[id(param)] == lr
        else:
            depth = layout.depth[name.removeprefix("encoder.")]
            assert rate[id(param)] == pytest.approx(lr * gamma ** (3 - depth)), name
        assert decay[id(param)] == (0.0 if name.endswith("bias") or param.ndim == 1 else 0.01)
    word = model.encoder.get_input_embeddings().weight
    assert rate[id(word)] == pytest.approx(lr * gamma ** 3)
    top = next(model.encoder.encoder.layer[2].parameters())
    assert rate[id(top)] == pytest.approx(lr)
    # the scheduler scales each group's own rate
    optimizer = build_optimizer(groups, "adamw", lr)
    build_scheduler(optimizer, total_steps=10, warmup_ratio=0.0)
    assert sorted({round(g["lr"] / lr, 6) for g in optimizer.param_groups}) == [0.125, 0.25, 0.5, 1.0]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_reinit_changes_the_top_layers_only(family: str, tmp_path: Path) -> None:
    encoder = _pretrained(family, tmp_path)
    pretrained = {n: p.detach().clone() for n, p in encoder.named_parameters()}
    apply_layer_options(encoder, RunConfig(reinit_layers=2))
    layout = encoder_layout(encoder)
    for name, param in encoder.named_parameters():
        if layout.depth[name] >= 2 and name in {n for n, _ in encoder.encoder.layer.named_parameters(prefix="encoder.layer")}:
            if param.ndim >= 2:
                assert not torch.equal(param, pretrained[name]), f"{name} was not re-initialised"
        else:
            assert torch.equal(param, pretrained[name]), f"{name} changed"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_dropped_layers_are_gone_and_the_encoder_still_loads(family: str, tmp_path: Path) -> None:
    encoder = _pretrained(family, tmp_path / "in")
    kept = {n: p.detach().clone() for n, p in encoder.named_parameters() if ".layer.2." not in n}
    apply_layer_options(encoder, RunConfig(drop_top_layers=1))
    encoder.save_pretrained(tmp_path / "out")
    loaded = AutoModel.from_pretrained(tmp_path / "out")
    assert loaded.config.num_hidden_layers == 2 and len(loaded.encoder.layer) == 2
    names = {n for n, _ in loaded.named_parameters()}
    assert not any(".layer.2." in n for n in names) and names == set(kept)
    assert all(torch.equal(p, kept[n]) for n, p in loaded.named_parameters())


def test_layer_counts_beyond_the_encoder_are_refused(tmp_path: Path) -> None:
    encoder = _pretrained("bert", tmp_path)
    for option, message in (({"drop_top_layers": 3}, "at least one must remain"), ({"reinit_layers": 4}, "only 3"),
                            ({"freeze_layers": 4}, "only 3")):
        with pytest.raises(MtbioError, match=message):
            apply_layer_options(encoder, RunConfig(**option))


def test_no_bias_correction_first_step_and_checkpoint_roundtrip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.zeros(5))
    optimizer = build_optimizer([{"params": [weight], "weight_decay": 0.0}], "adamw", 1e-3,
                                options={"bias_correction": False})
    assert isinstance(optimizer, AdamWNoBiasCorrection)
    weight.grad = torch.tensor([1.0, -2.0, 0.5, 3.0, -0.1])
    optimizer.step()
    # m = 0.1 g, v = 0.001 g^2: the first update is lr * 0.1 / sqrt(0.001) ≈ 3.16 lr (bias-corrected Adam: lr)
    assert torch.allclose(weight.detach(), -1e-3 * 0.1 / 0.001 ** 0.5 * weight.grad.sign(), rtol=1e-4)
    with pytest.raises(ValueError, match="optimizer 'adamax': bias_correction: not an option of this optimizer"):
        build_optimizer([{"params": [weight]}], "adamax", 1e-3, options={"bias_correction": False})

    def fresh() -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 2)
        opt = build_optimizer(parameter_groups(model, 0.01), "adamw", 1e-2, options={"bias_correction": False})
        return model, opt, build_scheduler(opt, 10, 0.0)

    def train(model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any, steps: range) -> None:
        for step in steps:
            g = torch.Generator().manual_seed(step)
            loss = model(torch.randn(4, 3, generator=g)).pow(2).sum()
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()

    straight, opt, sched = fresh()
    train(straight, opt, sched, range(4))
    first, opt, sched = fresh()
    train(first, opt, sched, range(2))
    saved = ckpt.save_checkpoint(tmp_path / "checkpoints", 2, first, opt, sched, {"global_step": 2})
    resumed, opt2, sched2 = fresh()
    ckpt.load_checkpoint(saved, resumed, opt2, sched2)
    train(resumed, opt2, sched2, range(2, 4))
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_options_come_from_yaml_and_flags() -> None:
    config = build_config({"freeze_layers": 2, "layerwise_lr_decay": 0.9, "optimizer": {"name": "adamw", "eps": 1e-6}},
                          {"reinit_layers": 1, "drop_top_layers": 1, "patience": 3})
    assert (config.freeze_layers, config.layerwise_lr_decay, config.reinit_layers) == (2, 0.9, 1)
    assert config.optimizer_spec() == ("adamw", {"betas": [0.9, 0.999], "eps": 1e-6, "bias_correction": True})
    assert config.drop_top_layers == 1 and config.patience == 3
    with pytest.raises(MtbioError, match="layerwise_lr_decay"):
        build_config({"layerwise_lr_decay": 1.5}, {})


def test_cli_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from mtbio import cli

    seen: dict[str, Any] = {}

    def fake_finetune(config: RunConfig) -> list:
        seen["config"] = config
        return []

    monkeypatch.setattr("mtbio.experiments.finetune.finetune", fake_finetune)
    result = CliRunner().invoke(cli.main, ["finetune", "--task", "demo-nli", "--freeze-layers", "1", "--layerwise-lr-decay",
                                           "0.8", "--reinit-layers", "1", "--drop-top-layers", "1",
                                           "--optimizer", "{name: adamw, bias_correction: false}",
                                           "--patience", "2", "--seeds", "3"])
    assert result.exit_code == 0, result.output
    config = seen["config"]
    assert (config.freeze_layers, config.layerwise_lr_decay, config.reinit_layers, config.drop_top_layers) == (1, 0.8, 1, 1)
    assert config.optimizer_spec()[1]["bias_correction"] is False and config.patience == 2 and config.seeds == 3


def test_refine_refuses_seeds() -> None:
    from mtbio.experiments.refine import refine

    with pytest.raises(MtbioError, match="--seeds"):
        refine(RunConfig(tasks=["demo-nli"], seeds=2))


# ---- end to end on the demo data with the tiny encoder -------------------------------------------------------
def _demo_config(tmp: Path, encoder: str, **overrides: Any) -> RunConfig:
    from mtbio.experiments.demo import SAMPLE_DIR

    values: dict[str, Any] = dict(tasks=["demo-nli"], task_defs=[str(SAMPLE_DIR / "task_defs")], data_dir=str(SAMPLE_DIR),
                                  encoder=encoder, output=str(tmp / "ft"), max_steps=3, batch_size=8,
                                  max_train_examples=24, seed=3, max_length=32)
    values.update(overrides)
    return RunConfig(**values)


def test_finetune_with_dropped_layer_saves_a_shallower_encoder(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.finetune import finetune

    [(run_dir, results)] = finetune(_demo_config(tmp_path, tiny_encoder, drop_top_layers=1, freeze_layers=0,
                                                 layerwise_lr_decay=0.9,
                                                 optimizer={"name": "adamw", "bias_correction": False}))
    config = json.loads((run_dir / "encoder" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    loaded = AutoModel.from_pretrained(run_dir / "encoder")
    assert len(loaded.encoder.layer) == 1
    assert results["stopped_early"] is False and results["steps"] == 3


def test_patience_stops_when_dev_does_not_improve(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.finetune import finetune

    # a learning rate too small to change any prediction: the second evaluation cannot improve
    [(run_dir, results)] = finetune(_demo_config(tmp_path, tiny_encoder, max_steps=20, eval_every=1, patience=1, lr=1e-12))
    assert results["stopped_early"] is True and results["steps"] == 2 and results["best_step"] == 1
    dev = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in dev if r["split"] == "dev"] == [1, 2]


def test_seeds_runs_report_and_evaluate(tmp_path: Path, tiny_encoder: str) -> None:
    from click.testing import CliRunner

    from mtbio import cli
    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.experiments.evaluate import evaluate_paths, format_evaluation_table
    from mtbio.experiments.finetune import finetune

    runs = finetune(_demo_config(tmp_path, tiny_encoder, seeds=2, output=str(tmp_path / "base")))
    assert [r[0] for r in runs] == [tmp_path / "base" / "demo-nli" / "seed-3", tmp_path / "base" / "demo-nli" / "seed-4"]
    finetune(_demo_config(tmp_path, tiny_encoder, seeds=2, output=str(tmp_path / "frozen"), freeze_layers=1))
    values = [json.loads((d / "results.json").read_text())["dev"]["demo-nli"]["accuracy"] for d, _ in runs]

    table = evaluate_paths([tmp_path / "base"], "dev", SAMPLE_DIR)
    [row] = table["rows"]
    assert row["n_runs"] == {"demo-nli": 2} and row["primary"]["demo-nli"] == pytest.approx(sum(values) / 2)
    assert "±" in format_evaluation_table(table)

    out = tmp_path / "report.md"
    result = CliRunner().invoke(cli.main, ["report", str(tmp_path / "base"), str(tmp_path / "frozen"),
                                           "--output", str(out), "--trivial", "--data-dir", str(SAMPLE_DIR),
                                           "--compare-to", "base"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| type | task (metric) | trivial | base | frozen | Δ frozen − base (verdict) |" in text
    mean = sum(values) / 2
    sd = abs(values[0] - values[1]) / 2 ** 0.5
    # the trivial score by hand: the better of the majority training label's share of the dev pairs and the
    # best constant on dev itself (dev's own majority)
    train_labels = [json.loads(x)["gold_label"] for x in (SAMPLE_DIR / "nli" / "train.jsonl").read_text().splitlines()]
    dev_labels = [json.loads(x)["gold_label"] for x in (SAMPLE_DIR / "nli" / "dev.jsonl").read_text().splitlines()]
    majority = max(set(train_labels), key=train_labels.count)
    trivial = max(dev_labels.count(majority), *(dev_labels.count(x) for x in set(dev_labels))) / len(dev_labels)
    mark = " ‡" if mean - trivial < 0.01 else ""   # a mean within a point of the trivial score is marked
    assert f"| NLI | demo-nli (accuracy) | {trivial * 100:.2f} | {mean * 100:.2f} ± {sd * 100:.2f}{mark} |" in text
    frozen = [json.loads((tmp_path / "frozen" / "demo-nli" / f"seed-{s}" / "results.json").read_text())["dev"]["demo-nli"]
              ["accuracy"] for s in (3, 4)]
    delta = sum(f - b for f, b in zip(frozen, values)) / 2
    assert f"| {delta * 100:+.2f} [" in text
    # demo-nli belongs to neither BLUE nor BLURB: only the plain average is shown, labelled as such
    assert "**average (plain mean, all tasks)**" in text and "BLUE average" not in text and "BLURB score" not in text
    csv_lines = out.with_suffix(".csv").read_text().splitlines()
    assert csv_lines[0].startswith("category,task,metric,trivial,base mean,base sd,base n")
    assert csv_lines[1].startswith(f"nli,demo-nli,accuracy,{trivial},")
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["rows"][0]["verdict"]["delta"] == pytest.approx(delta)

    (tmp_path / "empty").mkdir()
    bad = CliRunner().invoke(cli.main, ["report", str(tmp_path / "empty")])
    assert bad.exit_code == 2 and "no results.json" in bad.output
