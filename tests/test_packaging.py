"""A wheel installed outside the checkout (not editable) carries the built-in task definitions and the
demo samples: `mtbio tasks list` lists every shipped task and `mtbio demo` runs."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_installed_elsewhere_finds_its_task_definitions(tmp_path: Path, tiny_encoder: str) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, capture_output=True, cwd=tmp_path)
    [wheel] = list(wheels.glob("mtbio-*.whl"))
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # the dependencies come from this environment's site-packages, as a plain path entry (its .pth files,
    # among them an editable install of mtbio, are not run); mtbio itself only from the wheel
    inner_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip()
    Path(inner_site, "outer-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "MTBIO_DATA_DIR"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    where = subprocess.run([str(python), "-c", "import mtbio, mtbio.tasks.loading as l; print(mtbio.__file__); "
                            "print(l.BUILTIN_TASK_DEFS)"], capture_output=True, text=True, cwd=tmp_path, env=env)
    module_file, defs_dir = where.stdout.split()
    assert module_file.startswith(str(env_dir)) and defs_dir.startswith(str(env_dir)), where.stdout
    mtbio = [str(python), "-m", "mtbio"]
    listed = subprocess.run([*mtbio, "tasks", "list"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert {p.stem for p in (REPO / "task_defs").glob("*.yml")} - {"domains"} == names
    sources = subprocess.run([*mtbio, "data", "get", "chemprot", "--dry-run", "--data-dir", "data"],
                             capture_output=True, text=True, cwd=tmp_path, env=env)  # the wheel's sources manifest
    assert sources.returncode == 0 and len(sources.stdout.splitlines()) == 3, sources.stderr
    demo = subprocess.run([*mtbio, "demo", "--encoder", tiny_encoder, "--epochs", "1", "--output", str(tmp_path / "demo")],
                          capture_output=True, text=True, cwd=tmp_path, env=env)  # the wheel's samples, refine + fine-tune
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "demo-ner" in demo.stdout and "trivial" in demo.stdout
    assert (tmp_path / "demo" / "finetune" / "demo-nli" / "results.json").is_file()
