"""What every benchmark shares: the machine description, the measured matmul peak, model FLOPs,
peak memory, and writing the JSON result.

Achieved FLOP/s counts *useful* model FLOPs (real, non-pad tokens only) per second, so padding
and host overhead show up as a lower utilisation, as they should.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import platform
import resource
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from mtbio.model.inference import bf16_supported
from mtbio.training.flops import cpu_fields, matmul_peak, total_flops

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """Cores, CPU model (name, family and model number) and vector flags, GPU, and library versions."""
    import transformers

    info: dict[str, Any] = {"cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "python": platform.python_version(), "platform": platform.platform(),
                            "torch": torch.__version__, "transformers": transformers.__version__}
    cpu = cpu_fields()
    if "model name" in cpu:
        info["cpu_model"] = cpu["model name"]
    if "cpu family" in cpu and "model" in cpu:  # a virtual machine's model name may be only the vendor's
        info["cpu_family_model"] = f"family {cpu['cpu family']} model {cpu['model']}"
    if "flags" in cpu:
        info["cpu_flags"] = " ".join(f for f in cpu["flags"].split() if f.startswith(("avx512", "amx", "avx2", "fma")))
    info["cpu_bf16"] = bf16_supported("cpu")  # in hardware (AVX512-BF16 or AMX), not emulated
    info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()  # the kernels ATen dispatches to
    # instruction-set caps that emulate an older CPU on this one (AVX2 only: avx2 / AVX2 / AVX2)
    caps = {v: os.environ[v] for v in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
            if v in os.environ}
    if caps:
        info["isa_caps"] = caps
    info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    return info


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_tag() -> str:
    """Result-file tag of the device: '' on a CPU, '-<gpu>' (e.g. -h100) on a GPU."""
    if not torch.cuda.is_available():
        return ""
    words = torch.cuda.get_device_name(0).lower().replace("nvidia", "").split()
    return "-" + (words[0] if words else "gpu")


def matmul_peaks(seconds: float = 2.0) -> dict[str, float]:
    """Measured peak FLOP/s for fp32 and, where supported, bf16."""
    peaks = {"fp32": matmul_peak(torch.float32, seconds)}
    if device().type == "cuda" or machine()["cpu_bf16"]:
        peaks["bf16"] = matmul_peak(torch.bfloat16, seconds)
    return peaks


def highest_peaks(measured: list[dict[str, float]]) -> dict[str, float]:
    """The highest of several `matmul_peaks` measurements, per precision of the first (a measurement on a cold or
    busy machine reads low, so a benchmark judges its runs against the best it measured)."""
    return {precision: max(m[precision] for m in measured if precision in m) for precision in measured[0]}


def peak_memory_mb() -> float:
    """Peak GPU memory allocated (on a GPU) or this process's peak resident size (on a CPU)."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


@functools.lru_cache(maxsize=1)
def glibc() -> Any:
    """The C library (Linux with glibc): `mallinfo2`, `malloc_trim`."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    return libc


def glibc_heap() -> Mallinfo2:
    """glibc's `mallinfo2` (Linux, glibc 2.33+): heap in use `uordblks`, freed but kept `fordblks`, mapped blocks
    `hblkhd`, the arena's size `arena` (bytes)."""
    return glibc().mallinfo2()


def utilisation(flops: float, seconds: float, peak: float) -> dict[str, float]:
    achieved = flops / max(seconds, 1e-9)
    return {"achieved_flops_per_second": achieved, "fraction_of_peak": achieved / peak}


def write_result(name: str, result: dict[str, Any], results_dir: Path | None = None) -> Path:
    """Write `<results_dir>/<name>.json` (default: benchmarks/results/)."""
    directory = Path(results_dir) if results_dir else RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}.json"
    target.write_text(json.dumps(result, indent=2) + "\n")
    return target


def offline_environment() -> None:
    """Benchmarks never touch the network."""
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(key, "1")
    os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")


def materialize_encoder(name: str | None, workdir: Path) -> str:
    """An encoder path for the benchmark: `bert-base-random` builds a randomly initialised
    BERT-base config (12 layers, hidden 768) with the packaged MiniLM tokenizer (same uncased
    vocabulary) in `workdir`; anything else goes through mtbio's usual resolution."""
    from mtbio.model.encoder import load_tokenizer, resolve_encoder_name

    if name != "bert-base-random":
        return resolve_encoder_name(name)
    from transformers import BertConfig, BertModel

    target = Path(workdir) / "bert-base-random"
    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(target)
    load_tokenizer(None).save_pretrained(target)
    return str(target)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every model benchmark takes: data, task definitions, encoder, precision, peak, output."""
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("MTBIO_DATA_DIR", "../shared/data")),
                        help="Where the datasets live (default: MTBIO_DATA_DIR, else ../shared/data).")
    parser.add_argument("--task-defs", action="append", default=[], metavar="DIR",
                        help="Extra directory of task definitions (repeatable).")
    parser.add_argument("--encoder", default=None,
                        help="Encoder directory or hub name (default: the packaged MiniLM-L6); "
                             "'bert-base-random': a randomly initialised BERT-base.")
    parser.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    parser.add_argument("--peak-seconds", type=float, default=2.0,
                        help="How long each matmul peak measurement runs (default: 2).")
    parser.add_argument("--results-dir", type=Path, default=RESULTS,
                        help="Where the JSON result goes (default: benchmarks/results).")


def precision_name(mixed_precision: str) -> str:
    """`--mixed-precision` value → the key of its matmul peak: no → fp32, bf16 → bf16."""
    return "fp32" if mixed_precision == "no" else mixed_precision


def measure_peaks(mixed_precision: str, seconds: float = 2.0) -> dict[str, float]:
    """`matmul_peaks()`, refusing up front a --mixed-precision this machine cannot run."""
    peaks = matmul_peaks(seconds)
    if precision_name(mixed_precision) not in peaks:
        raise SystemExit(f"error: --mixed-precision {mixed_precision}: not supported on this machine")
    return peaks


def efficiency(config: Any, lengths: Iterable[int], seconds: float, peaks: dict[str, float], mixed_precision: str,
               training: bool) -> dict[str, Any]:
    """Useful FLOPs of sequences of `lengths` real tokens done in `seconds`, against the peak of the precision used."""
    precision = precision_name(mixed_precision)
    flops = total_flops(config, lengths, training)
    return {"precision": precision, "useful_flops": flops, "peak_flops_per_second": peaks[precision],
            **utilisation(flops, seconds, peaks[precision])}


def hf_tokenize(tokenizer: Any, task: Any, examples: Sequence[Any], max_length: int) -> Any:
    """Tokenize mtbio examples the way a plain Hugging Face script does: word lists for tagging,
    text (and text_b for pair tasks) otherwise; truncated, unpadded."""
    from mtbio.data.readers import is_pair_task

    if task.type == "tagging":
        return tokenizer([e.tokens for e in examples], is_split_into_words=True, truncation=True,
                         max_length=max_length)
    return tokenizer([e.text for e in examples], [e.text_b for e in examples] if is_pair_task(task) else None,
                     truncation=True, max_length=max_length)


def hf_model_and_collator(task: Any, encoder: str, tokenizer: Any) -> tuple[Any, Any]:
    """`AutoModelForTokenClassification` / `AutoModelForSequenceClassification` with its default collator."""
    from transformers import (AutoModelForSequenceClassification, AutoModelForTokenClassification,
                              DataCollatorForTokenClassification, DataCollatorWithPadding)

    if task.type == "tagging":
        model_cls, collator = AutoModelForTokenClassification, DataCollatorForTokenClassification(tokenizer)
    else:
        model_cls, collator = AutoModelForSequenceClassification, DataCollatorWithPadding(tokenizer)
    return model_cls.from_pretrained(encoder, num_labels=len(task.label_list) or 1), collator


def write_fixed_length_task(directory: Path, tokenizer: Any, length: int, train_examples: int,
                            dev_examples: int = 512, seed: int = 0) -> tuple[str, Path, Path]:
    """A two-label classification task whose every text fills `length` tokens once truncated, for
    measuring model FLOP utilisation at a fixed sequence length (as GPU MFU figures are quoted).

    Texts are random whole words of the tokenizer's vocabulary; the label says from which half of
    that (sorted) word list the first word comes. From a few hundred rows neither side learns that:
    runs of 256 and 640 rows ended at the dev set's trivial score (docs/speed.md), so these runs
    measure speed and memory, not quality. Returns (task name, task-definition directory, data
    directory).
    """
    import random

    from mtbio.experiments.training_run import write_task_defs
    from mtbio.tasks.schema import TaskDef

    rng = random.Random(seed)
    words = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) >= 3)
    halves = {"a": words[: len(words) // 2], "b": words[len(words) // 2:]}
    name = f"fixed-{length}"
    data_dir, defs_dir = Path(directory) / "data", Path(directory) / "task-defs"
    (data_dir / name).mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train_examples), ("dev", dev_examples)):
        with (data_dir / name / f"{split}.tsv").open("w") as handle:
            for i in range(count):
                label = rng.choice("ab")
                text = " ".join([rng.choice(halves[label]), *rng.choices(words, k=length)])  # >= length tokens
                handle.write(f"{split}-{i}\t{text}\t{label}\n")
    task = TaskDef(name=name, type="classification", description=f"Benchmark: random words filling {length} tokens",
                   format="tsv", columns={"id": 0, "text": 1, "label": 2},
                   files={"train": f"{name}/train.tsv", "dev": f"{name}/dev.tsv"}, labels=["a", "b"],
                   metric="accuracy", max_length=length)
    write_task_defs([task], defs_dir)
    return name, defs_dir, data_dir
