"""The annealed mixer (MT-DNN's annealed sampling): its schedule over the run, with --epochs and with
--max-steps, its options from YAML and flags, and its resume check."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from mtbio.data.mixers import MultiTaskBatchSampler
from mtbio.data.mixers.annealed import alphas
from mtbio.errors import MtbioError
from mtbio.training.config import RunConfig, build_config
from mtbio.training.trainer import TrainerOptions, build_sampler, run_length


def _options(**values: object) -> TrainerOptions:
    """What the trainer reads of a run config with these values."""
    return TrainerOptions.of(RunConfig(**values))  # type: ignore[arg-type]

SIZES = {"big": 6400, "small": 640}
LENGTHS = {t: [10] * n for t, n in SIZES.items()}  # batch 16: 400 + 40 = 440 batches an epoch


def _big_share(sampler: MultiTaskBatchSampler, epoch: int) -> float:
    counts = sampler.task_counts(epoch)
    return counts["big"] / sum(counts.values())


def _expected_share(alpha: float) -> float:
    return SIZES["big"] ** alpha / (SIZES["big"] ** alpha + SIZES["small"] ** alpha)


def test_task_proportions_follow_alpha_from_one_to_anneal_to_over_the_epochs() -> None:
    sampler = MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", anneal_to=0.2, run_batches=5 * 440)
    assert len(sampler) == 440
    expected = [1 - 0.8 * e / 4 for e in range(5)]  # α_e = 1 − (1 − anneal_to) · e / (E − 1)
    shares = []
    for epoch, alpha in enumerate(expected):
        assert np.allclose(alphas(sampler, epoch), alpha)
        shares.append(_big_share(sampler, epoch))
        assert shares[-1] == pytest.approx(_expected_share(alpha), abs=0.04)
    assert shares == sorted(shares, reverse=True) and shares[0] > 0.85 and shares[-1] < 0.65


def test_per_step_schedule_moves_within_an_epoch() -> None:
    sampler = MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", anneal_to=0.0, per="step", run_batches=440)
    assert alphas(sampler, 0)[0] == 1.0 and alphas(sampler, 0)[-1] == pytest.approx(0.0)
    plan = [task for task, _ in sampler.plan(0)]
    first, last = plan[:110], plan[-110:]
    assert first.count("big") / 110 > 0.8 and last.count("big") / 110 < 0.65
    one_epoch = MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", anneal_to=0.0)  # per epoch, E = 1: α stays 1
    assert np.allclose(alphas(one_epoch, 0), 1.0)


def test_the_schedule_follows_max_steps_not_epochs() -> None:
    mixer = {"name": "annealed", "anneal_to": 0.0}
    epochs_only = build_sampler(_options(mixer=mixer, epochs=10, batch_size=16, grad_accum=2), LENGTHS)
    per_epoch, _ = run_length(_options(batch_size=16, grad_accum=2), 440)
    stepped = build_sampler(_options(mixer=mixer, epochs=10, batch_size=16, grad_accum=2, max_steps=2 * per_epoch),
                            LENGTHS)
    assert epochs_only.run_batches == 10 * 440 and stepped.run_batches == 2 * 440
    assert np.allclose(alphas(epochs_only, 1), 1 - 1 / 9)
    assert np.allclose(alphas(stepped, 1), 0.0)  # the second and last epoch of a --max-steps run: uniform
    assert _big_share(stepped, 1) == pytest.approx(0.5, abs=0.06)
    partial = build_sampler(_options(mixer={**mixer, "per": "step"}, batch_size=16, max_steps=100), LENGTHS)
    assert partial.run_batches == 100 and alphas(partial, 0)[99] == pytest.approx(0.0)


def test_options_from_yaml_mapping_and_flags() -> None:
    config = build_config(yaml.safe_load("mixer: {name: annealed, anneal_to: 0.5}"), {})
    assert config.mixer_spec() == ("annealed", {"anneal_to": 0.5, "per": "epoch"})
    assert config.mixer == {"name": "annealed", "anneal_to": 0.5, "per": "epoch"}  # written out whole in config.yaml
    assert build_config(yaml.safe_load(yaml.safe_dump(config.model_dump())), {}) == config  # config.yaml reads back
    assert build_config({}, {"mixer": "annealed"}).mixer_spec() == ("annealed", {"anneal_to": 0.2, "per": "epoch"})
    with pytest.raises(MtbioError, match="anneal_sto: not an option of this mixer"):
        build_config({"mixer": {"name": "annealed", "anneal_sto": 0.5}}, {})
    with pytest.raises(MtbioError, match="less than or equal to 1"):
        build_config({"mixer": {"name": "annealed", "anneal_to": 2}}, {})
    with pytest.raises(MtbioError, match="--temperature is not an option of --mixer annealed"):
        build_config({}, {"mixer": "annealed", "temperature": 3.0})
    flat = build_config({"mixer": {"name": "temperature", "temperature": 3.0}}, {"temperature": 4.0})  # the flag wins
    assert flat.mixer_spec() == ("temperature", {"temperature": 4.0, "cap": None})
    assert flat.mixer == {"name": "temperature", "temperature": 4.0, "cap": None}  # config.yaml records it


def test_resume_refuses_another_run_length() -> None:
    sampler = MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", run_batches=880)
    sampler.set_epoch(1)
    iterator = iter(sampler)
    next(iterator)
    state = sampler.state_dict()
    assert state["run_batches"] == 880
    same = MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", run_batches=880)
    same.load_state_dict(state)
    assert list(same) == list(iterator)
    with pytest.raises(ValueError, match="run_batches"):
        MultiTaskBatchSampler(LENGTHS, 16, strategy="annealed", run_batches=1320).load_state_dict(state)
    assert "run_batches" not in MultiTaskBatchSampler(LENGTHS, 16).state_dict()  # other mixers' state is as before
