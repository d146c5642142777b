"""LoRA adapters (`--adapter lora`) and `mtbio merge`: tiny encoders, synthetic keyword tasks and the demo samples."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

import mtbio
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.evaluate import evaluate_paths
from mtbio.experiments.finetune import finetune
from mtbio.experiments.refine import refine
from mtbio.training.config import RunConfig, build_config

SENTENCES = ["the patient was seen today with fever", "aspirin noted in clinic report", "no other findings rash"]


def _config(keyword_tasks: tuple[str, str], encoder: str | None, output: Path, tasks: list[str],
            **overrides: object) -> RunConfig:
    defs, data = keyword_tasks
    values = dict(tasks=tasks, task_defs=[defs], data_dir=data, encoder=encoder, output=str(output), max_steps=24,
                  batch_size=16, lr=1e-2, seed=3, mixed_precision="no",
                  adapter={"name": "lora", "r": 4, "dropout": 0.0})
    values.update(overrides)
    return RunConfig(**values)


def _logits(run: object, task: str) -> torch.Tensor:
    encoded = run.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        return run.model(task, **encoded).logits


def test_single_task_lora_trains_the_adapter_and_head_on_a_frozen_encoder(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    [(run_dir, results)] = finetune(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all"]))
    base, saved = load_file(f"{micro_encoder}/model.safetensors"), load_file(str(run_dir / "encoder/model.safetensors"))
    assert set(saved) == set(base) and all(torch.equal(saved[k], base[k]) for k in base)  # encoder/ is the base
    adapter = run_dir / "heads/kw-all/adapter"
    assert sorted(p.name for p in adapter.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"], config["lora_alpha"]) == ("LORA", 4, 16)
    assert set(config["target_modules"]) == {"query", "value"}  # peft's default for BERT
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert weights and all(".lora_" in k for k in weights) and any(v.abs().sum() > 0 for k, v in weights.items()
                                                                    if "lora_B" in k)  # B starts at 0: it trained
    run = mtbio.load(run_dir)
    assert run.model.adapters == ("kw-all",) and len(run.predict("kw-all", SENTENCES)) == 3
    table = evaluate_paths([run_dir], "dev", Path(keyword_tasks[1]), precision="no")  # reload scores as trained
    assert table["rows"][0]["scores"]["kw-all"] == pytest.approx(results["dev"]["kw-all"], abs=1e-9)


def test_each_task_has_its_own_adapter_and_changes_only_its_own_predictions(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    run_dir, _ = refine(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all", "kw-noise"]))
    run = mtbio.load(run_dir, precision="no")
    assert set(run.model.adapters) == {"kw-all", "kw-noise"}
    before = {task: _logits(run, task) for task in run.model.adapters}
    with torch.no_grad():
        for name, param in run.model.encoder.named_parameters():
            if ".lora_B.kw-all." in name:
                param.add_(0.5)
    after = {task: _logits(run, task) for task in run.model.adapters}
    assert not torch.allclose(before["kw-all"], after["kw-all"])
    torch.testing.assert_close(before["kw-noise"], after["kw-noise"], rtol=0, atol=0)


def test_finetune_from_a_lora_refine_run_continues_its_adapters(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    run_dir, _ = refine(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all", "kw-noise"], max_steps=4))
    with pytest.raises(MtbioError, match="a LoRA run.*--adapter lora"):
        finetune(_config(keyword_tasks, None, tmp_path / "full", ["kw-all"], from_run=str(run_dir), adapter="none"))
    with caplog.at_level("INFO", logger="mtbio"):
        [(tuned, _)] = finetune(_config(keyword_tasks, None, tmp_path / "ft", ["kw-all"], from_run=str(run_dir),
                                        max_steps=2))
    assert f"kw-all: adapter starts from {run_dir / 'heads/kw-all/adapter'}" in caplog.text
    assert mtbio.load(tuned).model.adapters == ("kw-all",)
    with pytest.raises(MtbioError, match="r=4.*give the same r"):
        finetune(_config(keyword_tasks, None, tmp_path / "r8", ["kw-all"], from_run=str(run_dir),
                         adapter={"name": "lora", "r": 8}))


def test_lora_export_loads_with_peft_alone_and_merged_with_transformers_alone(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    [(run_dir, _)] = finetune(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all"]))
    ours = _logits(mtbio.load(run_dir, precision="no"), "kw-all")
    out = tmp_path / "export"
    result = CliRunner().invoke(main, ["export", str(run_dir), "--task", "kw-all", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert {"adapter_config.json", "adapter_model.safetensors", "README.md", "base"} <= {p.name for p in out.iterdir()}
    script = ("import json, sys, torch\nfrom peft import PeftModel\n"
              "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
              f"base = AutoModelForSequenceClassification.from_pretrained({str(out / 'base')!r})\n"
              f"model = PeftModel.from_pretrained(base, {str(out)!r}).eval()\n"
              f"tokenizer = AutoTokenizer.from_pretrained({str(out)!r})\n"
              f"encoded = tokenizer({SENTENCES!r}, padding=True, return_tensors='pt')\n"
              "with torch.no_grad():\n    logits = model(**encoded).logits\n"
              "print(json.dumps({'mtbio': 'mtbio' in sys.modules, 'logits': logits.tolist(),\n"
              "                  'labels': model.config.id2label}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["mtbio"] is False and set(loaded["labels"].values()) == {"pos", "neg"}
    torch.testing.assert_close(torch.tensor(loaded["logits"]), ours, rtol=1e-4, atol=1e-4)

    merged = tmp_path / "merged"
    result = CliRunner().invoke(main, ["export", str(run_dir), "--task", "kw-all", "--output", str(merged),
                                       "--merge-adapter"])
    assert result.exit_code == 0, result.output
    assert not (merged / "adapter_config.json").exists()
    from transformers import AutoModelForSequenceClassification

    plain = AutoModelForSequenceClassification.from_pretrained(merged).eval()
    encoded = mtbio.load(run_dir).tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(plain(**encoded).logits, ours, rtol=1e-4, atol=1e-4)


def test_merge_of_a_run_with_itself_reproduces_its_scores(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    [(run_dir, results)] = finetune(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all"], adapter="none",
                                            lr=1e-3))
    data = Path(keyword_tasks[1])
    for method in ("ties", "dare_linear", "average"):
        out = tmp_path / f"merged-{method}"
        result = CliRunner().invoke(main, ["merge", str(run_dir), str(run_dir), "--method", method, "--density", "1",
                                           "--output", str(out)])
        assert result.exit_code == 0, result.output
        [row] = evaluate_paths([out], "dev", data, precision="no")["rows"]
        assert row["stage"] == "merge" and row["scores"]["kw-all"] == pytest.approx(results["dev"]["kw-all"]), method
    # --score records the scores in results.json, as a trained run does, so `report` tables a merged run
    scored = tmp_path / "merged-scored"
    result = CliRunner().invoke(main, ["merge", str(run_dir), str(run_dir), "--method", "average", "--output",
                                       str(scored), "--score", "dev", "--data-dir", str(data)])
    assert result.exit_code == 0 and "dev: kw-all" in result.output, result.output
    saved = json.loads((scored / "results.json").read_text())
    assert saved["dev"]["kw-all"] == pytest.approx(results["dev"]["kw-all"]) and saved["test"] == {}


def test_merge_equals_peft_merge_utils_applied_by_hand(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    from peft.utils.merge_utils import ties

    runs = finetune(_config(keyword_tasks, micro_encoder, tmp_path / "runs", ["kw-all", "kw-noise"], adapter="none",
                            lr=1e-3))
    out = tmp_path / "merged"
    result = CliRunner().invoke(main, ["merge", *[str(r) for r, _ in runs], "--method", "ties", "--density", "0.4",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    base = load_file(f"{micro_encoder}/model.safetensors")
    tuned = [load_file(str(r / "encoder/model.safetensors")) for r, _ in runs]
    merged = load_file(str(out / "encoder/model.safetensors"))
    assert set(merged) == set(base)
    for name, value in base.items():
        expected = value + ties([t[name] - value for t in tuned], torch.ones(2), density=0.4)
        torch.testing.assert_close(merged[name], expected, rtol=0, atol=1e-7, msg=name)
    assert sorted(p.name for p in (out / "heads").iterdir()) == ["kw-all", "kw-noise"]
    for run_dir, _ in runs:
        task = run_dir.name
        assert load_file(str(out / "heads" / task / "model.safetensors")).keys() == \
            load_file(str(run_dir / "heads" / task / "model.safetensors")).keys()
    assert json.loads((out / "results.json").read_text())["method"] == "ties"


def test_bad_adapter_and_merge_input_is_one_line(tmp_path: Path, micro_encoder: str,
                                                 keyword_tasks: tuple[str, str], tiny_encoder: str) -> None:
    with pytest.raises(MtbioError, match="--freeze-layers.*--adapter lora"):
        build_config({}, {"adapter": "lora", "freeze_layers": 2})
    with pytest.raises(MtbioError, match="(?i)target modules"):
        finetune(_config(keyword_tasks, micro_encoder, tmp_path / "bad", ["kw-all"],
                         adapter={"name": "lora", "target_modules": ["nothing"]}))
    [(a, _)], [(b, _)] = (finetune(_config(keyword_tasks, micro_encoder, tmp_path / task, [task], adapter="none",
                                           max_steps=2)) for task in ("kw-all", "kw-noise"))
    result = CliRunner().invoke(main, ["merge", str(a), str(b), "--output", str(tmp_path / "m"),
                                       "--base", tiny_encoder])  # the tiny BERT is not their base: other shapes
    assert result.exit_code == 2 and "do not match the base encoder" in result.output


def test_merge_of_a_lora_run_averages_its_adapters_merged_as_peft_merges_them(
        tmp_path: Path, micro_encoder: str, keyword_tasks: tuple[str, str]) -> None:
    from peft import PeftModel
    from transformers import AutoModel

    run_dir, _ = refine(_config(keyword_tasks, micro_encoder, tmp_path / "run", ["kw-all", "kw-noise"], max_steps=4))
    out = tmp_path / "merged"
    result = CliRunner().invoke(main, ["merge", str(run_dir), "--method", "average", "--output", str(out)])
    assert result.exit_code == 0, result.output
    by_peft = [PeftModel.from_pretrained(AutoModel.from_pretrained(run_dir / "encoder"),
                                         run_dir / "heads" / task / "adapter").merge_and_unload().state_dict()
               for task in ("kw-all", "kw-noise")]
    merged = load_file(str(out / "encoder/model.safetensors"))
    for name, value in merged.items():
        torch.testing.assert_close(value, (by_peft[0][name] + by_peft[1][name]) / 2, rtol=1e-6, atol=1e-7, msg=name)
    assert not (out / "heads" / "kw-all" / "adapter").exists()
    assert mtbio.load(out).model.adapters == ()


def test_adapter_options_come_as_a_mapping_on_the_command_line_and_from_an_older_config_yaml(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, RunConfig] = {}

    def fake_finetune(config: RunConfig) -> list:
        seen["config"] = config
        return []

    monkeypatch.setattr("mtbio.experiments.finetune.finetune", fake_finetune)
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--adapter", "{name: lora, r: 4, alpha: 8}"])
    assert result.exit_code == 0, result.output
    name, options = seen["config"].adapter_spec()
    assert (name, options.r, options.alpha, options.dropout, options.target_modules) == ("lora", 4, 8, 0.1, ())
    for value, message in (("{name: lora, rank: 4}", "adapter 'lora': rank: not an option of this adapter"),
                           ("{name: lora, r: 0}", "r: Input should be greater than or equal to 1"),
                           ("{name: lora", "is not a YAML mapping"), ("qlora", "unknown adapter 'qlora'")):
        result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--adapter", value])
        assert result.exit_code != 0 and message in result.output, result.output
    # a config.yaml written while LoRA's and AdamW's options were flat options of the run
    old = RunConfig.model_validate({"adapter": "lora", "lora_r": 4, "lora_alpha": 16, "lora_dropout": 0.1,
                                    "lora_target_modules": ["query"], "no_bias_correction": True})
    assert old.adapter == {"name": "lora", "r": 4, "alpha": 16, "dropout": 0.1, "target_modules": ["query"]}
    assert old.optimizer_spec() == ("adamw", {"betas": [0.9, 0.999], "eps": 1e-8, "bias_correction": False})
    assert RunConfig.model_validate({"adapter": "none", "lora_r": 8, "no_bias_correction": False}).adapter == "none"
