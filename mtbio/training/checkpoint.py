"""Resumable training checkpoints in safetensors + JSON (no pickles), written atomically.

    checkpoints/step-00000120/
        model.safetensors        encoder + heads
        optimizer.safetensors    per-parameter optimizer tensors
        rng.safetensors          torch RNG state
        state.json               optimizer groups, scheduler, mixer, python/numpy RNG, trainer counters
        manifest.json            written last: file sizes and SHA-256; a checkpoint without a valid
                                 manifest is torn and is skipped with a warning

A checkpoint is written under a temporary name and renamed into place, so an interrupted or
failed write (a full disk) never damages the previous one.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model
from torch import nn

from mtbio.errors import MtbioError
from mtbio.fileio import make_dir, save_module, save_tensors, write_json, write_text, writing

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PREFIX = "step-"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for param_id, entries in state["state"].items():
        for key, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{param_id}.{key}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(param_id), {})[key] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in state["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def _optimizer_from_files(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        param_id, key = name.split(".", 1)
        state.setdefault(int(param_id), {})[key] = value
    for param_id, entries in meta["scalars"].items():
        state.setdefault(int(param_id), {}).update(entries)
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()} for g in meta["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_checkpoint(
    checkpoints_dir: Path,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    trainer_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write a complete checkpoint for `step`, then delete all but the newest `keep`."""
    make_dir(checkpoints_dir)
    final = checkpoints_dir / f"{PREFIX}{step:08d}"
    tmp = checkpoints_dir / f".tmp-{PREFIX}{step:08d}"
    with writing(checkpoints_dir, cleanup=tmp, hint="the previous checkpoint is intact; free some space and "
                 "continue with --resume"):
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        save_module(model, tmp / "model.safetensors")
        opt_tensors, opt_meta = _optimizer_to_files(optimizer)
        save_tensors(opt_tensors, tmp / "optimizer.safetensors")
        save_tensors({"torch": torch.get_rng_state()}, tmp / "rng.safetensors")
        np_state = np.random.get_state()
        py_state = random.getstate()
        state = {
            "trainer": trainer_state,
            "optimizer": opt_meta,
            "scheduler": scheduler.state_dict(),
            "rng": {
                "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
                "python": [py_state[0], list(py_state[1]), py_state[2]],
            },
        }
        write_json(tmp / "state.json", state, indent=None)
        files = {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(tmp.iterdir())}
        write_json(tmp / MANIFEST, {"step": step, "files": files}, indent=1)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    for old in list_checkpoints(checkpoints_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(checkpoints_dir: Path) -> list[Path]:
    """Checkpoint directories by step, oldest first (complete or not)."""
    if not checkpoints_dir.is_dir():
        return []
    return sorted(p for p in checkpoints_dir.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def verify_checkpoint(path: Path) -> str | None:
    """None when complete and intact, else the reason it is not."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (the write did not finish)"
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError:
        return "unreadable manifest"
    for name, info in manifest.get("files", {}).items():
        file = path / name
        if not file.is_file() or file.stat().st_size != info["bytes"]:
            return f"{name} is missing or truncated"
        if _sha256(file) != info["sha256"]:
            return f"{name} does not match its checksum"
    return None


def latest_checkpoint(checkpoints_dir: Path) -> Path | None:
    """The newest intact checkpoint; torn or corrupt ones are skipped with a warning."""
    for candidate in reversed(list_checkpoints(checkpoints_dir)):
        problem = verify_checkpoint(candidate)
        if problem is None:
            return candidate
        log.warning("skipping checkpoint %s: %s", candidate, problem)
    return None


def load_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> dict[str, Any]:
    """Restore model, optimizer, scheduler and RNG state; return the trainer state."""
    missing, unexpected = load_model(model, str(path / "model.safetensors"), strict=False)
    if missing or unexpected:
        raise MtbioError(f"{path}: checkpoint does not match the model (missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})")
    state = json.loads((path / "state.json").read_text())
    _optimizer_from_files(optimizer, load_file(str(path / "optimizer.safetensors")), state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(load_file(str(path / "rng.safetensors"))["torch"])
    kind, keys, pos, has_gauss, gauss = state["rng"]["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_py = state["rng"]["python"]
    random.setstate((version, tuple(internal), gauss_py))
    return state["trainer"]


def listener_states(path: Path) -> dict[str, Any]:
    """The listeners' states a checkpoint holds (`Listener.state_dict`, by name; none in older checkpoints)."""
    return json.loads((path / "state.json").read_text())["trainer"].get("listeners", {})


def truncate_metrics(path: Path, step: int) -> None:
    """Drop metrics.jsonl records after `step` (they are redone after resuming from `step`)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
    if len(kept) != len(lines):
        write_text(path, "".join(line + "\n" for line in kept))
