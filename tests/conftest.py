"""Shared test fixtures: offline Hugging Face, isolated caches, the real data directory, tiny encoders."""
from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # a worker's torch and subprocesses get its share of the cores
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (setup.cfg's addopts): a worker per core, at most four (each holds torch and starts processes)."""
    return max(1, min(os.cpu_count() or 1, 4))


def _default_data_dir() -> Path:
    env = os.environ.get("MTBIO_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _offline_and_isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the network or the user's caches. The xdist workers of one session share a cache (its
    entries are written whole or not at all), so each split is parsed and featurized once per session."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cache"
    monkeypatch.setenv("HF_HOME", str(cache / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_UPDATE_DOWNLOAD_COUNTS", "0")
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(cache / "mtbio"))


@pytest.fixture(autouse=True)
def _mtbio_logs_reach_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI test's console set-up stops the `mtbio` logger propagating; each test starts with it propagating,
    so `caplog` sees mtbio's log lines whatever ran before."""
    import logging

    monkeypatch.setattr(logging.getLogger("mtbio"), "propagate", True)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real benchmark data (../shared/data or MTBIO_DATA_DIR); tests needing it skip without it."""
    path = _default_data_dir()
    if not path.is_dir():
        pytest.skip(f"real data not found at {path}")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


def make_tiny_encoder(path: Path, dropout: float = 0.1, layers: int = 2) -> str:
    """A `layers`-deep, 32-wide BERT with the MiniLM vocabulary, saved as a local HF directory."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mtbio.model.encoder import default_encoder_path

    tokenizer = AutoTokenizer.from_pretrained(default_encoder_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def make_tiny_modernbert(path: Path) -> str:
    """A 2-layer, 32-wide ModernBERT (global attention in every layer) with the MiniLM vocabulary."""
    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

    from mtbio.model.encoder import default_encoder_path

    tokenizer = AutoTokenizer.from_pretrained(default_encoder_path())
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                              global_attn_every_n_layers=1, pad_token_id=tokenizer.pad_token_id,
                              cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                              bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    ModernBertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_modernbert(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random ModernBERT (issue 67): the 2026 encoder family beside BERT, RoBERTa, DeBERTa, ELECTRA, ALBERT."""
    return make_tiny_modernbert(tmp_path_factory.mktemp("tiny-modernbert"))


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 2-layer, 32-wide BERT with the MiniLM vocabulary (default dropout)."""
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_encoder_6_layers(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny BERT as deep as the packaged MiniLM-L6, for examples that freeze or drop layers."""
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny-bert-6"), layers=6)


@pytest.fixture(scope="session")
def tiny_encoder_no_dropout(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same tiny BERT without dropout, so runs on different process counts can be compared exactly."""
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny-bert-nodrop"), dropout=0.0)


@pytest.fixture
def task_defs_without_dropout(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """Copies shipped task definitions under new names ({source: name}) with head dropout 0, into one
    directory, so runs that must match exactly (process counts, sub-batches) can be compared."""
    def write(renames: dict[str, str]) -> Path:
        directory = tmp_path / "defs-no-dropout"
        directory.mkdir(exist_ok=True)
        for source, name in renames.items():
            text = (REPO / "task_defs" / f"{source}.yml").read_text()
            text = text.replace(f"name: {source}\n", f"name: {name}\n") + "dropout: 0.0\n"
            (directory / f"{name}.yml").write_text(text)
        return directory
    return write


# ---- synthetic keyword tasks for sweeps (pairwise, stilt, launchers) ---------------------------
POS = ["fever", "rash", "cough", "nausea", "pain", "edema"]
NEG = ["aspirin", "insulin", "heparin", "statin", "warfarin", "morphine"]
FILLER = "the patient was seen today with a history of and no other findings noted in clinic report".split()


@pytest.fixture(scope="session")
def micro_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 2-layer, 32-wide BERT whose vocabulary is just the synthetic words (fast optimizer steps)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    path = tmp_path_factory.mktemp("micro-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(FILLER + POS + NEG))]
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(path)
    return str(path)


def _rows(rng: random.Random, n: int, prefix: str, keywords: int = 6) -> list[tuple[str, str, str]]:
    """Sentences of filler words with one keyword; the keyword decides the label."""
    rows = []
    for i in range(n):
        label = rng.choice(["pos", "neg"])
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 6))]
        words.insert(rng.randrange(len(words) + 1), rng.choice((POS if label == "pos" else NEG)[:keywords]))
        rows.append((f"{prefix}{i}", " ".join(words), label))
    return rows


def _write(path: Path, rows: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows))


@pytest.fixture(scope="session")
def keyword_tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Three tasks with known relations; returns (task-defs dir, data dir).

    kw-few:   12 training sentences (repeated 8×) using only 2 of the 6 keywords per class: alone it
              cannot label the other keywords (dev uses all of them).
    kw-all:   192 sentences over all keywords, the same labelling: it should help kw-few.
    kw-noise: kw-all's sentences with shuffled labels: it carries no information, so it must not help.
    """
    root = tmp_path_factory.mktemp("keyword-tasks")
    rng = random.Random(7)
    few = _rows(rng, 12, "f", keywords=2)
    _write(root / "data/few/train.tsv", [(f"{a}.{r}", b, c) for r in range(8) for a, b, c in few])
    dev = _rows(rng, 96, "d")
    full = _rows(rng, 192, "t")
    _write(root / "data/few/dev.tsv", dev)
    _write(root / "data/all/train.tsv", full)
    _write(root / "data/all/dev.tsv", dev)
    labels = [r[2] for r in full]
    rng.shuffle(labels)
    _write(root / "data/noise/train.tsv", [(a, b, lab) for (a, b, _), lab in zip(full, labels)])
    dev_labels = [r[2] for r in dev]
    rng.shuffle(dev_labels)
    _write(root / "data/noise/dev.tsv", [(a, b, lab) for (a, b, _), lab in zip(dev, dev_labels)])
    test = _rows(rng, 48, "s")
    for folder in ("few", "all", "noise"):
        _write(root / f"data/{folder}/test.tsv", test)
    (root / "defs").mkdir()
    for name, folder in (("kw-few", "few"), ("kw-all", "all"), ("kw-noise", "noise")):
        (root / "defs" / f"{name}.yml").write_text(
            f"name: {name}\ntype: classification\nformat: tsv\ncolumns: {{id: 0, text: 1, label: 2}}\n"
            f"files: {{train: {folder}/train.tsv, dev: {folder}/dev.tsv, test: {folder}/test.tsv}}\n"
            "labels: [pos, neg]\nmetric: accuracy\nmax_length: 16\n")
    return str(root / "defs"), str(root / "data")
