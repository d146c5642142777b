"""The multi-task batch sampler: single-task batches, strategies, determinism, resume, sharding, padding."""
from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest

from mtbio.data.mixer import padding_fraction, shard, split_by_length
from mtbio.data.mixers import MultiTaskBatchSampler
from mtbio.training.config import RunConfig
from mtbio.training.trainer import TrainerOptions, build_sampler


def _options(**values: object) -> TrainerOptions:
    """What the trainer reads of a run config with these values."""
    return TrainerOptions.of(RunConfig(**values))  # type: ignore[arg-type]


def _lengths(sizes: dict[str, int], seed: int = 0) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    return {t: rng.integers(5, 120, n).tolist() for t, n in sizes.items()}


SIZES = {"ner": 1000, "nli": 330, "sts": 70}


def test_every_batch_is_one_task_and_proportional_covers_each_example_once() -> None:
    lengths = _lengths(SIZES)
    sampler = MultiTaskBatchSampler(lengths, batch_size=32, bucket_multiplier=4)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        seen: dict[str, list[int]] = {t: [] for t in SIZES}
        batches = list(sampler)
        assert len(batches) == len(sampler) == 32 + 11 + 3
        for task, indices in batches:
            assert 1 <= len(indices) <= 32
            assert all(0 <= i < SIZES[task] for i in indices)
            seen[task] += indices
        for task, n in SIZES.items():
            assert sorted(seen[task]) == list(range(n))  # every example (hence batch) exactly once
        assert sampler.task_counts(epoch) == {"ner": 32, "nli": 11, "sts": 3}
        # tasks are interleaved, not run one after another
        assert [t for t, _ in batches] != sorted((t for t, _ in batches), key=list(SIZES).index)


def test_same_seed_same_plan_and_different_seed_or_epoch_differs() -> None:
    lengths = _lengths(SIZES)
    a = MultiTaskBatchSampler(lengths, 16, seed=3).plan(0)
    assert a == MultiTaskBatchSampler(lengths, 16, seed=3).plan(0)
    assert a != MultiTaskBatchSampler(lengths, 16, seed=4).plan(0)
    assert a != MultiTaskBatchSampler(lengths, 16, seed=3).plan(1)


def test_temperature_and_uniform_frequencies() -> None:
    lengths = _lengths(SIZES)
    steps = Counter()
    temp = MultiTaskBatchSampler(lengths, 16, strategy="temperature", temperature=2.0, cap=500)
    for epoch in range(40):
        temp.set_epoch(epoch)
        steps.update(task for task, _ in temp)
    weights = {t: min(n, 500) ** 0.5 for t, n in SIZES.items()}
    total = sum(steps.values())
    assert total == 40 * len(temp)
    for task, w in weights.items():
        assert steps[task] / total == pytest.approx(w / sum(weights.values()), abs=0.02)

    uni = MultiTaskBatchSampler(lengths, 16, strategy="uniform")
    counts = Counter(task for e in range(40) for task, _ in uni.plan(e))
    for task in SIZES:
        assert counts[task] / sum(counts.values()) == pytest.approx(1 / 3, abs=0.02)


def test_temperature_streams_cycle_without_repeats_inside_a_pass() -> None:
    # 'sts' is drawn far more often than it has batches: consecutive passes each cover it once
    lengths = _lengths({"big": 2000, "sts": 64})
    sampler = MultiTaskBatchSampler(lengths, 16, strategy="uniform")
    sts = [b for t, b in sampler.plan(0) if t == "sts"]
    assert len(sts) > 8
    for start in range(0, len(sts) - 3, 4):
        assert sorted(i for b in sts[start : start + 4] for i in b) == list(range(64))


def test_ratio_uses_all_main_batches_and_proportional_auxiliaries() -> None:
    lengths = _lengths({"main": 320, "a": 960, "b": 320})
    sampler = MultiTaskBatchSampler(lengths, 32, strategy="ratio", main_task="main", ratio=2.0)
    assert len(sampler) == 10 + 20
    aux = Counter()
    for epoch in range(50):
        plan = sampler.plan(epoch)
        main = [i for t, b in plan if t == "main" for i in b]
        assert sorted(main) == list(range(320))
        aux.update(t for t, _ in plan if t != "main")
    assert aux["a"] / (aux["a"] + aux["b"]) == pytest.approx(0.75, abs=0.03)
    # more auxiliary batches than exist: cycles instead of failing
    big = MultiTaskBatchSampler(lengths, 32, strategy="ratio", main_task="main", ratio=5.0)
    assert len(big.plan(0)) == 60


def test_resume_mid_epoch_continues_with_the_exact_remaining_batches() -> None:
    lengths = _lengths(SIZES)
    reference = MultiTaskBatchSampler(lengths, 16, strategy="temperature", seed=7)
    reference.set_epoch(2)
    expected = list(reference) + list(reference)  # rest of epoch 2, then epoch 3

    first = MultiTaskBatchSampler(lengths, 16, strategy="temperature", seed=7)
    first.set_epoch(2)
    it = iter(first)
    consumed = [next(it) for _ in range(17)]
    state = json.loads(json.dumps(first.state_dict()))  # plain values
    assert state["epoch"] == 2 and state["position"] == 17

    resumed = MultiTaskBatchSampler(lengths, 16, strategy="temperature", seed=7)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # a training loop re-entering the epoch must not restart it
    rest = list(resumed)
    assert consumed + rest == expected[: len(reference)]
    assert resumed.state_dict()["epoch"] == 3 and resumed.state_dict()["position"] == 0
    assert list(resumed) == expected[len(reference) :]

    other = MultiTaskBatchSampler(lengths, 16, strategy="temperature", seed=8)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)


def test_ranks_run_the_same_task_with_disjoint_shards() -> None:
    lengths = _lengths(SIZES)
    ranks = [MultiTaskBatchSampler(lengths, 32, seed=5) for _ in range(2)]
    for (task0, batch0), (task1, batch1) in zip(*ranks):
        assert task0 == task1 and batch0 == batch1
        s0, s1 = shard(batch0, 0, 2), shard(batch1, 1, 2)
        assert set(s0).isdisjoint(s1) and sorted(s0 + s1) == sorted(batch0)
        assert abs(len(s0) - len(s1)) <= 1
    assert shard([4], 1, 2) == [4]  # never an empty shard
    with pytest.raises(ValueError):
        shard([1, 2], 2, 2)


def test_length_bucketing_keeps_padding_under_ten_percent() -> None:
    rng = np.random.default_rng(0)
    sigma = 0.6
    lengths = {"ner": np.clip(np.round(rng.lognormal(np.log(39) - sigma**2 / 2, sigma, 12500)), 5, 128).astype(int)}
    assert 35 < lengths["ner"].mean() < 43
    bucketed = padding_fraction(build_sampler(_options(), lengths), lengths)
    unbucketed = padding_fraction(build_sampler(_options(bucket_window=1), lengths), lengths)  # --bucket-window 1
    assert bucketed <= 0.10
    assert unbucketed > 0.5


def _padded(groups: list[list[int]], lengths: list[int]) -> int:
    return sum(max(lengths[i] for i in group) * len(group) for group in groups)


def test_split_by_length_by_hand_and_against_every_split() -> None:
    lengths = [30, 5, 6, 29, 7, 100]
    # sorted: 5 6 7 29 30 100; three groups: [5 6 7] [29 30] [100] = 21 + 60 + 100
    assert split_by_length(range(6), lengths, 3) == [[1, 2, 4], [3, 0], [5]]
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = rng.integers(1, 60, 12).tolist()
        indices = rng.choice(12, int(rng.integers(1, 9)), replace=False).tolist()
        parts = int(rng.integers(1, 5))
        groups = split_by_length(indices, lengths, parts)
        assert sorted(i for g in groups for i in g) == sorted(indices)
        assert len(groups) == min(parts, len(indices)) and all(groups)
        order, n = sorted(indices, key=lambda i: lengths[i]), len(indices)
        best = min(_padded([order[a:b] for a, b in zip((0, *cuts), (*cuts, n))], lengths)
                   for cuts in itertools.combinations(range(1, n), len(groups) - 1))
        assert _padded(groups, lengths) == best


def test_sub_batches_of_random_batches_pad_far_less() -> None:
    rng = np.random.default_rng(1)
    lengths = {"ner": np.clip(np.round(rng.lognormal(np.log(36), 0.6, 3200)), 5, 128).astype(int)}
    plan = list(build_sampler(_options(bucket_window=1), lengths))
    whole = padding_fraction(plan, lengths)
    split = padding_fraction([("ner", g) for task, b in plan for g in split_by_length(b, lengths["ner"], 4)], lengths)
    assert whole > 0.5 and split < 0.2


def test_padding_fraction_by_hand() -> None:
    lengths = {"t": [8, 4, 3]}
    assert padding_fraction([("t", [0, 1])], lengths) == pytest.approx(1 - 12 / 16)
    assert padding_fraction([("t", [1, 2])], lengths, pad_to_multiple_of=None) == pytest.approx(1 - 7 / 8)


def test_drop_last_and_validation() -> None:
    lengths = _lengths({"a": 100, "b": 40})
    sampler = MultiTaskBatchSampler(lengths, 32, drop_last=True)
    assert all(len(b) == 32 for _, b in sampler.plan(0)) and len(sampler) == 3 + 1
    with pytest.raises(ValueError, match="no full batch"):
        MultiTaskBatchSampler(_lengths({"a": 10}), 32, drop_last=True)
    with pytest.raises(ValueError, match="strategy"):
        MultiTaskBatchSampler(lengths, 32, strategy="no-such-mixer")
    with pytest.raises(ValueError, match="main_task"):
        MultiTaskBatchSampler(lengths, 32, strategy="ratio")


def test_a_new_strategy_is_one_registered_function(tmp_path, tiny_encoder) -> None:
    """Registered here, nowhere else: `--mixer` and a YAML config then take it, and training uses it."""
    import yaml
    from click.testing import CliRunner

    from mtbio import cli
    from mtbio.data.mixer import MIXERS, register_mixer
    from mtbio.experiments.demo import SAMPLE_DIR

    calls: list[int] = []

    @register_mixer("round-robin-test", shuffle_plan=False)
    def round_robin(sampler: MultiTaskBatchSampler, epoch: int) -> list:
        calls.append(epoch)
        passes = {t: sampler.task_pass(t, epoch) for t in sampler.tasks}
        return [(t, passes[t][i]) for i in range(max(map(len, passes.values()))) for t in sampler.tasks
                if i < len(passes[t])]

    try:
        common = ["--tasks", "demo-nli,demo-relation", "--data-dir", str(SAMPLE_DIR), "--task-defs",
                  str(SAMPLE_DIR / "task_defs"), "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "8",
                  "--max-train-examples", "16", "--max-length", "32"]
        flag = CliRunner().invoke(cli.main, ["refine", *common, "--mixer", "round-robin-test",
                                             "--output", str(tmp_path / "flag")])
        assert flag.exit_code == 0, flag.output
        config_file = tmp_path / "run.yml"
        config_file.write_text("mixer: round-robin-test\n")
        from_file = CliRunner().invoke(cli.main, ["refine", *common, "--config", str(config_file),
                                                  "--output", str(tmp_path / "file")])
        assert from_file.exit_code == 0, from_file.output
        for run in ("flag", "file"):
            assert yaml.safe_load((tmp_path / run / "config.yaml").read_text())["mixer"] == "round-robin-test"
        assert calls  # the plan came from the registered function
        bad = CliRunner().invoke(cli.main, ["refine", *common, "--mixer", "nope", "--output", str(tmp_path / "bad")])
        assert bad.exit_code != 0 and "unknown mixer strategy 'nope'" in bad.output
    finally:
        MIXERS.unregister("round-robin-test")
