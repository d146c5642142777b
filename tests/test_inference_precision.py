"""Inference precision of evaluate / predict / mtbio.load: auto follows the run's training precision
where the hardware has bf16; bf16 is refused clearly where it has not."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import mtbio
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.finetune import finetune
from mtbio.model import inference
from mtbio.model.inference import bf16_supported, resolve_inference_precision
from mtbio.training.config import RunConfig

HAS_BF16 = bf16_supported("cpu")


def test_auto_follows_the_training_precision_where_the_hardware_has_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "bf16_supported", lambda device: True)
    assert resolve_inference_precision("auto", "bf16", "cpu") == "bf16"
    assert resolve_inference_precision("auto", "no", "cpu") == "no"
    assert resolve_inference_precision("auto", None, "cpu") == "no"  # older runs record nothing: fp32
    assert resolve_inference_precision("no", "bf16", "cpu") == "no"
    monkeypatch.setattr(inference, "bf16_supported", lambda device: False)
    assert resolve_inference_precision("auto", "bf16", "cpu") == "no"  # an AVX2-only CPU falls back to fp32
    with pytest.raises(MtbioError, match="no bf16 support"):
        resolve_inference_precision("bf16", "no", "cpu")
    with pytest.raises(MtbioError, match="choose one of auto, no, bf16"):
        resolve_inference_precision("fp16", "no", "cpu")


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 (AVX512-BF16/AMX)")
def test_a_bf16_run_is_evaluated_and_predicted_in_bf16_and_fp32_on_request(tmp_path: Path, tiny_encoder: str) -> None:
    config = RunConfig(tasks=["demo-relation"], task_defs=[str(SAMPLE_DIR / "task_defs")], data_dir=str(SAMPLE_DIR),
                       encoder=tiny_encoder, output=str(tmp_path / "run"), max_steps=2, batch_size=8,
                       max_train_examples=16, max_length=32, mixed_precision="bf16")
    [(run_dir, results)] = finetune(config)
    assert results["mixed_precision"] == "bf16"
    assert mtbio.load(run_dir).precision == "bf16" and mtbio.load(run_dir, "no").precision == "no"
    tables = {}
    for precision in ("auto", "no"):
        out = tmp_path / f"eval-{precision}.json"
        done = CliRunner().invoke(main, ["evaluate", str(run_dir), "--data-dir", str(SAMPLE_DIR), "--output", str(out),
                                         "--mixed-precision", precision])
        assert done.exit_code == 0, done.output
        tables[precision] = json.loads(out.read_text())["rows"][0]
    assert tables["auto"]["precision"] == "bf16" and tables["no"]["precision"] == "no"
    # scored in the precision it was trained in, evaluate reproduces the dev score saved at training
    assert tables["auto"]["primary"]["demo-relation"] == pytest.approx(results["dev"]["demo-relation"]["micro_f1"])
