"""Inference precision of evaluate / predict / mtbio.load: auto follows the run's training precision
where the hardware has bf16; bf16 is refused clearly where it has not."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import mtbio
from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.model import inference
from mtbio.model.inference import bf16_supported, resolve_inference_precision

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


@pytest.mark.parametrize("flags, native", [({}, False), ({"_is_avx512_bf16_supported": True}, True),
                                           ({"_is_amx_tile_supported": True}, True)])
def test_bf16_counts_only_in_hardware_and_training_refuses_emulated_bf16(
        monkeypatch: pytest.MonkeyPatch, flags: dict[str, bool], native: bool) -> None:
    """oneDNN accepts bf16 on any AVX512 CPU (a Xeon without AVX512-BF16 trained in it at x0.42 fp32's speed)."""
    import torch

    from mtbio.training.trainer import make_accelerator

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.setattr(torch.cpu, name, lambda value=flags.get(name, False): value, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")  # make_accelerator sizes oneDNN's cache: keep ours
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "1")
    assert bf16_supported("cpu") is native
    assert resolve_inference_precision("auto", "bf16", "cpu") == ("bf16" if native else "no")
    if not native:
        with pytest.raises(MtbioError, match="no bf16 support in hardware .AVX512-BF16 or AMX."):
            make_accelerator("bf16")


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 (AVX512-BF16/AMX)")
def test_a_bf16_run_is_evaluated_and_predicted_in_bf16_and_fp32_on_request(tmp_path: Path, tiny_encoder: str) -> None:
    # trained in its own process: Accelerate's precision is fixed once per process
    command = [str(Path(sys.executable).parent / "mtbio"), "finetune", "--task", "demo-relation", "--task-defs",
               str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--output",
               str(tmp_path / "run"), "--max-steps", "2", "--batch-size", "8", "--max-train-examples", "16",
               "--max-length", "32", "--mixed-precision", "bf16"]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = tmp_path / "run" / "demo-relation"
    results = json.loads((run_dir / "results.json").read_text())
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
