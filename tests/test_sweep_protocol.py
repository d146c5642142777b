"""A sweep's protocol is the training options its cells share, read from the fields' declarations
(`per_cell` marks the ones a sweep sets per cell): the committed example sweeps still check, and a
component's options (a mixer or weighting mapping) are part of it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from mtbio.errors import MtbioError
from mtbio.experiments.study_config import StudyConfig
from mtbio.experiments.sweep import check_protocol, protocol, record_protocol
from mtbio.training.config import RunConfig, flat_fields, flat_values, protocol_options, run_options, upgrade_retired

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SWEEPS = sorted(p.parent for p in EXAMPLES.glob("*/sweep.json"))


@pytest.mark.parametrize("sweep_dir", SWEEPS, ids=lambda p: p.name)
def test_committed_sweeps_still_check(sweep_dir: Path, tmp_path: Path) -> None:
    # options recorded before their component owned them (lora_*, no_bias_correction) read as its options
    saved = flat_values(upgrade_retired(json.loads((sweep_dir / "sweep.json").read_text())["protocol"]), RunConfig)
    # every option they recorded is still part of the protocol, but the checkpoint and log cadence (recorded
    # before they were found not to change what a cell trains)
    assert set(saved) - set(protocol_options()) <= {"save_every", "log_every"}
    # options added since were off (their field defaults) when the sweep ran, whatever today's recipe sets
    added = {k: flat_fields(RunConfig)[k].get_default(call_default_factory=True) for k in protocol_options()
             if k not in saved}
    config = StudyConfig(**added, **saved, tasks=["a"], seed=1, output="elsewhere")  # per-cell options do not matter
    check_protocol(sweep_dir, config)
    if "min_steps" in added and config.recipe == "minilm":  # today's recipe trains otherwise: refused, named
        with pytest.raises(MtbioError, match="min_steps: None there, 200 now"):
            check_protocol(sweep_dir, StudyConfig(**saved, tasks=["a"], seed=1, output="elsewhere"))
    changed = StudyConfig(**{**saved, "batch_size": saved["batch_size"] + 1})
    with pytest.raises(MtbioError, match="batch_size"):
        check_protocol(sweep_dir, changed)


def test_protocol_is_every_training_option_not_set_per_cell() -> None:
    declared = {name for name, field in flat_fields(RunConfig).items() if (field.json_schema_extra or {}).get("per_cell")}
    assert declared == {"tasks", "domain", "output", "data_dir", "task_defs", "seed", "recipe", "resume", "save_every",
                        "log_every"}
    assert set(protocol_options()) == {n for n in run_options() if n not in declared} - {"from_run", "finetune_heads"}
    assert {"mixer", "weighting", "epochs", "lr"} <= set(protocol(StudyConfig()))
    assert not {"launcher", "alpha", "predictor", "seeds"} & set(protocol(StudyConfig()))  # sweep and command options


def test_component_options_are_part_of_the_protocol(tmp_path: Path) -> None:
    annealed = StudyConfig(mixer={"name": "annealed", "anneal_to": 0.5}, weighting={"name": "uncertainty"})
    record_protocol(tmp_path, annealed)
    check_protocol(tmp_path, annealed)
    with pytest.raises(MtbioError, match="mixer"):
        check_protocol(tmp_path, annealed.model_copy(update={"mixer": {"name": "annealed", "anneal_to": 0.3,
                                                                       "per": "epoch"}}))
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(SWEEPS[0] / "sweep.json", old / "sweep.json")
    saved = json.loads((old / "sweep.json").read_text())["protocol"]
    assert "weighting" not in saved
    # recorded before --weighting (and the small-data options) existed: trained at their defaults
    check_protocol(old, StudyConfig(**saved, recipe="mt-bert"))
    # recorded while LoRA's options were flat run options: read as the adapter's
    flat = tmp_path / "flat"
    flat.mkdir()
    recorded = {**protocol(StudyConfig(adapter="lora")), "lora_r": 4, "lora_alpha": 16, "no_bias_correction": False}
    (flat / "sweep.json").write_text(json.dumps({"protocol": recorded}))
    check_protocol(flat, StudyConfig(adapter={"name": "lora", "r": 4}))
    with pytest.raises(MtbioError, match="adapter: .*'r': 4, .* there, 'lora' now"):
        check_protocol(flat, StudyConfig(adapter="lora"))


def test_checkpoint_and_log_cadence_do_not_change_what_a_cell_trains(tmp_path: Path, tiny_encoder: str) -> None:
    """Why --save-every and --log-every are not part of the protocol: a run that checkpoints and logs at every
    step ends with the weights and scores of one that does so once."""
    from safetensors.torch import load_file

    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.experiments.refine import refine

    def run(name: str, **cadence: int) -> tuple[dict, dict]:
        config = StudyConfig(tasks=["demo-ner", "demo-relation"], task_defs=[str(SAMPLE_DIR / "task_defs")],
                           data_dir=str(SAMPLE_DIR), encoder=tiny_encoder, output=str(tmp_path / name), max_steps=4,
                           batch_size=8, max_train_examples=32, seed=3, max_length=48, **cadence)
        run_dir, results = refine(config)
        return load_file(str(run_dir / "encoder" / "model.safetensors")), results["dev"]

    often, once = run("often", save_every=1, log_every=1), run("once")
    assert often[1] == once[1]
    assert set(often[0]) == set(once[0]) and all(torch.equal(often[0][k], once[0][k]) for k in once[0])
    config = StudyConfig(tasks=["a"], save_every=1, log_every=1)
    record_protocol(tmp_path / "sweep", StudyConfig(tasks=["a"]))
    check_protocol(tmp_path / "sweep", config)  # a sweep's copies may checkpoint more often
