"""Saving and loading the model part of a run directory. Safetensors and JSON only, no pickles.

    encoder/                 save_pretrained of the encoder + tokenizer (plain `AutoModel.from_pretrained`)
    heads/<task>/head_config.json
    heads/<task>/model.safetensors
    heads/<task>/adapter/    a LoRA run's adapter of the task (PEFT's adapter_config.json + adapter_model.safetensors);
                             `encoder/` is then the base encoder the adapters apply to

Loading is strict: a head directory with unexpected files, a head config with unknown fields or
an unknown type, or weights whose names or shapes differ from the config is refused with a
message naming the file.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from mtbio.errors import MtbioError
from mtbio.fileio import fresh_dir, replace_dir, save_pretrained, save_tensors, write_json, writing
from mtbio.model.adapters import ADAPTER_DIR, base_state_dict, load_adapter, save_adapter
from mtbio.model.encoder import load_encoder, load_tokenizer
from mtbio.model.heads import HeadConfig, build_head
from mtbio.run_dir import RunDir
from mtbio.tasks.kinds import kind_names
from mtbio.model.multitask import MultiTaskModel

HEAD_CONFIG = "head_config.json"
HEAD_WEIGHTS = "model.safetensors"


def save_model(model: MultiTaskModel, tokenizer: Any, run_dir: Path, tasks: list[str] | None = None) -> None:
    """The run's best weights: `encoder/` (`save_pretrained` of encoder and tokenizer) and `heads/<task>/` (of
    `tasks` only, where given).
    Both are written in full under temporary names before either replaces the old one, so a failed
    write (a full disk) is one line and leaves the previous best weights whole."""
    hint = "the previous best weights are intact; free some space and continue with --resume"
    staged: list[tuple[Path, Path]] = []
    try:
        with writing(run_dir, hint=hint):
            encoder_tmp = fresh_dir(RunDir(run_dir).encoder_dir)
            staged.append((encoder_tmp, RunDir(run_dir).encoder_dir))
            if model.adapters:  # the base encoder; each task's adapter goes beside its head
                save_pretrained(model.encoder, encoder_tmp, state_dict=base_state_dict(model.encoder))
            else:
                save_pretrained(model.encoder, encoder_tmp)
            save_pretrained(tokenizer, encoder_tmp)
            heads_tmp = fresh_dir(RunDir(run_dir).heads_dir)
            staged.append((heads_tmp, RunDir(run_dir).heads_dir))
            for name, head in model.heads.items():
                if tasks is not None and name not in tasks:
                    continue
                write_json(heads_tmp / name / HEAD_CONFIG, head.config.to_json())
                tensors = {k: v.detach().contiguous().cpu() for k, v in head.state_dict().items()}
                save_tensors(tensors, heads_tmp / name / HEAD_WEIGHTS)
                if name in model.adapters:
                    save_adapter(model.encoder, name, heads_tmp / name / ADAPTER_DIR)
    except BaseException:
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    for tmp, target in staged:
        replace_dir(tmp, target)


def read_head_config(head_dir: Path) -> HeadConfig:
    """Validate a head directory and parse its config; refuses anything unexpected."""
    present = {p.name for p in head_dir.iterdir()}
    unexpected = sorted(present - {HEAD_CONFIG, HEAD_WEIGHTS, ADAPTER_DIR})
    if unexpected:
        raise MtbioError(f"{head_dir}: unexpected file(s) {unexpected}; a head holds only {HEAD_CONFIG}, {HEAD_WEIGHTS} "
                         f"and a LoRA run's {ADAPTER_DIR}/")
    for needed in (HEAD_CONFIG, HEAD_WEIGHTS):
        if needed not in present:
            raise MtbioError(f"{head_dir}: missing {needed}")
    path = head_dir / HEAD_CONFIG
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        config = HeadConfig.from_json(data)
    except (ValueError, TypeError) as exc:
        raise MtbioError(f"{path}: invalid head config ({exc})") from None
    if config.type not in kind_names():
        raise MtbioError(f"{path}: unknown head type '{config.type}' (known: {', '.join(kind_names())})")
    if config.task != head_dir.name:
        raise MtbioError(f"{path}: config names task '{config.task}' but the directory is '{head_dir.name}'")
    if not isinstance(config.labels, list) or not all(isinstance(x, str) for x in config.labels):
        raise MtbioError(f"{path}: 'labels' must be a list of strings")
    return config


def load_head(head_dir: Path, hidden_size: int | None = None) -> Any:
    """Rebuild a head from `heads/<task>/`, loading its weights strictly."""
    config = read_head_config(head_dir)
    if hidden_size is not None and config.hidden_size != hidden_size:
        raise MtbioError(f"{head_dir}: head expects hidden size {config.hidden_size}, the encoder has {hidden_size}")
    head = build_head(config)
    weights_path = head_dir / HEAD_WEIGHTS
    try:
        weights = load_file(str(weights_path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for corrupt files
        raise MtbioError(f"{weights_path}: unreadable safetensors file ({exc})") from None
    expected = head.state_dict()
    if set(weights) != set(expected) or any(weights[k].shape != expected[k].shape for k in expected):
        raise MtbioError(f"{weights_path}: weights do not match the head config (names or shapes differ)")
    head.load_state_dict(weights, strict=True)
    return head


def load_model(run_dir: Path, tasks: list[str] | None = None, **encoder_overrides: Any) -> tuple[MultiTaskModel, Any]:
    """Encoder + the named heads (all by default) from a run directory."""
    run_dir = Path(run_dir)
    encoder_dir = RunDir(run_dir).encoder_dir
    if not (encoder_dir / "config.json").is_file():
        raise MtbioError(f"{run_dir}: not an mtbio run directory (no encoder/config.json)")
    encoder = load_encoder(str(encoder_dir), **encoder_overrides)
    tokenizer = load_tokenizer(str(encoder_dir))
    heads_dir = RunDir(run_dir).heads_dir
    available = sorted(p.name for p in heads_dir.iterdir() if p.is_dir()) if heads_dir.is_dir() else []
    wanted = available if tasks is None else tasks
    missing = [t for t in wanted if t not in available]
    if missing:
        raise MtbioError(f"{run_dir}: no head for task(s) {missing} (heads: {', '.join(available) or 'none'})")
    hidden = int(encoder.config.hidden_size)
    heads = {t: load_head(heads_dir / t, hidden) for t in wanted}
    adapters = tuple(t for t in wanted if (heads_dir / t / ADAPTER_DIR).is_dir())
    if adapters and len(adapters) != len(wanted):
        raise MtbioError(f"{run_dir}: tasks {sorted(set(wanted) - set(adapters))} have no {ADAPTER_DIR}/ beside their "
                         f"head, tasks {sorted(adapters)} have one; a LoRA run has one for every task")
    for task in adapters:
        load_adapter(encoder, task, heads_dir / task / ADAPTER_DIR)
    return MultiTaskModel(encoder, heads, adapters), tokenizer

