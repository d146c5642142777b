"""The package's layers only import downwards, and no modules import each other in a circle.

Every `import` and `from ... import` in `mtbio/` counts, at module level or inside a function.
The allowed order is written once, here (ARCHITECTURE.md explains each layer): a module may import
from its own layer and from any layer before it in LAYERS.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mtbio"
LAYERS = ["errors", "fileio", "run_dir", "registry", "logs", "tasks", "data", "evaluation", "model", "kinds", "training", "reporting", "experiments",
          "cli", "__main__"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> set[str]:
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "mtbio"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "mtbio":
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}  # `from mtbio.data import featurize`
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path, name) if m in modules and m != name} for name, path in modules.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else len(LAYERS)  # `mtbio` itself: the public facade, on top


def test_every_import_points_down_the_layers() -> None:
    graph = _graph()
    assert all(len(m.split(".")) == 1 or m.split(".")[1] in LAYERS for m in graph), "a package is missing from LAYERS"
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if _layer(b) > _layer(a))
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds function-level imports (a test that could not fail would prove nothing)."""
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from mtbio.cli import main\n    return main\n")
    assert "mtbio.cli" in _imports(source, "mtbio.tasks.mod")


def test_the_cli_and_its_help_import_no_torch() -> None:
    """`mtbio --help` (and every command's) reads only the CLI and the option models: torch, ~2 s to import on a
    CPU, is loaded by the commands that run models, not by the entry point."""
    import subprocess
    import sys

    code = ("import sys; from click.testing import CliRunner; from mtbio.cli import main; "
            "assert CliRunner().invoke(main, ['--help']).exit_code == 0; "
            "assert CliRunner().invoke(main, ['finetune', '--help']).exit_code == 0; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout[:300]


def test_the_run_config_does_not_travel_below_the_experiments() -> None:
    """Below experiments/ a function takes the run's whole config only to narrow it (`TrainerOptions.of`,
    `StepOptions.of`) or in the config's own module: the trainer, the step engine and the components receive what
    they read."""
    takers = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                annotations = [ast.unparse(a.annotation) for a in node.args.args + node.args.kwonlyargs if a.annotation]
                if any("RunConfig" in a or "StudyConfig" in a for a in annotations):
                    takers.add(f"{module}.{node.name}")
    below = {t for t in takers if _layer(t) < LAYERS.index("experiments")}
    assert below == {"mtbio.training.config.build_config", "mtbio.training.config.save_config",
                     "mtbio.training.trainer.of", "mtbio.training.step_engine.of"}
    assert len(takers - below) > 50  # the walk is found at all: the experiments take it
