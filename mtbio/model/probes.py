"""No-training baselines: what an encoder scores on a task before any fine-tuning. A fine-tuned score
means something only beside these (and the trivial score).

- `cosine-mean`, `cosine-cls` (pair tasks): the two texts encoded separately, pooled (mean over
  tokens, or [CLS]), their cosine the one feature of a model fitted on the training split: a
  linear regression for regression tasks (Pearson and Spearman are those of the raw cosine when the
  fitted slope is positive), a logistic regression for classification.
- `probe` (classification, multi-label, regression; single texts and pairs): a linear model
  (logistic regression, one per label for multi-label; ridge for regression) on frozen mean-pooled
  embeddings of the input (a pair encoded together, as the fine-tuned heads see it).

- `probe` (tagging): a multinomial logistic regression on the frozen embedding of each word's first
  sub-word, one tag per word (words past the encoder's length are tagged `O`).

Each probe predicts with the weights its `head_weights` fits (the LP-FT head start), so a head that reads the
probe's features (under LP-FT a sentence-level head reads `PROBE_POOLING`) starts at the probe's score.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from mtbio.data.example import Example, Label
from mtbio.data.featurize import IGNORE_INDEX
from mtbio.data.readers import is_pair_task
from mtbio.evaluation.metrics import score_task
from mtbio.logs import bars_enabled
from mtbio.tasks.schema import SlidingWindow, TaskDef

if TYPE_CHECKING:
    import torch

POOLINGS = ("mean", "cls")
PROBE_POOLING = "mean"  # what a sentence-level probe reads; under LP-FT a new sentence-level head reads it too
ABSENT_BIAS = -10.0  # below every fitted logit: a class the training set never shows stays unpredicted


def _no_grad(function: Callable) -> Callable:
    """`torch.no_grad()` around `function`, torch imported when it runs (a kind's declaration names its probe
    without importing torch)."""
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return function(*args, **kwargs)

    return run


def embed(encoder: Any, tokenizer: Any, texts: Sequence[str], texts_b: Sequence[str] | None = None,
          pooling: str = "mean", max_length: int = 128, batch_size: int = 64,
          window: SlidingWindow | None = None) -> np.ndarray:
    """Pooled last-layer embeddings (float64), one row per text (or text pair)."""
    return embed_pooled(encoder, tokenizer, texts, texts_b, (pooling,), max_length, batch_size, window)[pooling]


@_no_grad
def embed_pooled(encoder: Any, tokenizer: Any, texts: Sequence[str], texts_b: Sequence[str] | None = None,
                 poolings: Sequence[str] = POOLINGS, max_length: int = 128,
                 batch_size: int = 64, window: SlidingWindow | None = None) -> dict[str, np.ndarray]:
    """{pooling: embeddings} from one pass of the encoder; texts go through it in batches of similar length (less
    padding), the rows come back in the texts' order. With a `window` (single texts), each text's windows are
    pooled and combined as a sentence-level head reading them does."""
    from mtbio.model.inference import PROGRESS_MIN_EXAMPLES

    encoder.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]) + (len(texts_b[i]) if texts_b is not None else 0))
    rows: dict[str, list[np.ndarray]] = {pooling: [] for pooling in poolings}
    bar = tqdm(total=len(texts), desc="embed", unit="ex", leave=False, dynamic_ncols=True,
               disable=not bars_enabled() or len(texts) <= PROGRESS_MIN_EXAMPLES)
    for start in range(0, len(texts), batch_size):
        chunk = order[start:start + batch_size]
        pair = [texts_b[i] for i in chunk] if texts_b is not None else None
        strided = {} if window is None else {"return_overflowing_tokens": True, "stride": window.stride}
        inputs = tokenizer([texts[i] for i in chunk], pair, padding=True, truncation=True, max_length=max_length,
                           return_tensors="pt", **strided)
        owner = inputs.pop("overflow_to_sample_mapping", None)
        hidden = encoder(**inputs).last_hidden_state.float()
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = {"cls": lambda: hidden[:, 0], "mean": lambda: (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)}
        for pooling in poolings:
            vectors = pooled[pooling]()
            if window is not None:
                vectors = _combine(vectors, owner, len(chunk), window)
            rows[pooling].append(vectors.double().numpy())
        bar.update(len(chunk))
    bar.close()
    back = np.argsort(np.array(order, dtype=np.int64))  # sorted position of each text
    width = int(encoder.config.hidden_size)
    return {pooling: np.concatenate(parts)[back] if parts else np.zeros((0, width)) for pooling, parts in rows.items()}


def _combine(vectors: torch.Tensor, owner: torch.Tensor, count: int, window: SlidingWindow) -> torch.Tensor:
    """Each text's windows' vectors (`owner`: the text of each row) combined as `window.aggregate` says; the
    first `window.max_windows` windows of a text."""
    import torch

    out = []
    for text in range(count):
        mine = vectors[owner == text][:window.max_windows]
        out.append(mine.max(0).values if window.aggregate == "max" else mine.mean(0))
    return torch.stack(out)


@_no_grad
def word_embeddings(encoder: Any, tokenizer: Any, sentences: Sequence[Sequence[str]], max_length: int = 128,
                    batch_size: int = 32, window: SlidingWindow | None = None) -> list[np.ndarray]:
    """Per sentence, the last-layer vector of each word's first sub-word (float64, words × hidden; a word
    cut off by `max_length` gets no row, so a sentence may have fewer rows than words). With a `window`, each
    word's vector is from the first window that holds its first sub-word."""
    import torch

    encoder.eval()
    out: list[np.ndarray] = []
    for start in range(0, len(sentences), batch_size):
        batch = [list(words) for words in sentences[start:start + batch_size]]
        strided = {} if window is None else {"return_overflowing_tokens": True, "stride": window.stride}
        inputs = tokenizer(batch, is_split_into_words=True, padding=True, truncation=True, max_length=max_length,
                           return_tensors="pt", **strided)
        owner = inputs.pop("overflow_to_sample_mapping", torch.arange(len(batch))).tolist()
        hidden = encoder(**{k: v for k, v in inputs.items() if k != "offset_mapping"}).last_hidden_state.float()
        firsts: list[dict[int, tuple[int, int]]] = [{} for _ in batch]
        windows = [0] * len(batch)
        for row, text in enumerate(owner):
            windows[text] += 1
            if window is not None and windows[text] > window.max_windows:
                continue
            for position, word in enumerate(inputs.word_ids(row)):
                if word is not None and word not in firsts[text]:
                    firsts[text][word] = (row, position)
        for found in firsts:
            places = [found[w] for w in sorted(found)]
            out.append(hidden[[r for r, _ in places], [p for _, p in places]].double().numpy()
                       if places else np.zeros((0, hidden.shape[-1])))
    return out


def tag_probe(encoder: Any, tokenizer: Any, train: Sequence[Example], scored: Sequence[Example],
              max_length: int, window: SlidingWindow | None = None, tags: Sequence[str] = ()) -> list[list[str]]:
    """The token-level probe's tags for `scored`: a logistic regression from each word's vector to its tag (over
    `tags`, the head's tag list, fitted as the LP-FT head start is: `ClassProbe.head_weights`)."""
    fit = word_embeddings(encoder, tokenizer, [ex.tokens or [] for ex in train], max_length, window=window)
    x = np.concatenate([v for v in fit if len(v)]) if any(len(v) for v in fit) else np.zeros((0, 1))
    y = [str(tag) for ex, v in zip(train, fit) for tag in list(ex.label or [])[:len(v)]]  # type: ignore[arg-type]
    vectors = word_embeddings(encoder, tokenizer, [ex.tokens or [] for ex in scored], max_length, window=window)
    predict = class_model(x, y, list(tags) or sorted(set(y)))
    out = []
    for ex, v in zip(scored, vectors):
        predicted = predict(v) if len(v) else []
        out.append(predicted + ["O"] * (len(ex.tokens or []) - len(predicted)))
    return out


def class_model(train_x: np.ndarray, train_y: Sequence[str], names: Sequence[str]) -> Callable[[np.ndarray], list[str]]:
    """The classes the head start fitted on (train_x, train_y) predicts for the rows of an array
    (`ClassProbe.head_weights` over the classes `names`, in the head's order): the baseline predicts exactly as the
    LP-FT start does. One class seen in training: that class."""
    index = {name: i for i, name in enumerate(names)}
    y = np.array([index[str(label)] for label in train_y], dtype=np.int64)
    found = ClassProbe().head_weights(train_x, y, len(names)) if len(set(y.tolist())) > 1 else None
    if found is None:
        constant = str(train_y[0]) if len(train_y) else "O"
        return lambda x: [constant] * len(x)
    weight, bias = found
    return lambda x: [names[i] for i in (x @ weight.T + bias).argmax(-1).tolist()]


def cosines(encoder: Any, tokenizer: Any, examples: Sequence[Example], max_length: int) -> dict[str, np.ndarray]:
    """{pooling: cos(embed(text), embed(text_b)) per pair example}, the two texts encoded separately."""
    a = embed_pooled(encoder, tokenizer, [ex.text or "" for ex in examples], max_length=max_length)
    b = embed_pooled(encoder, tokenizer, [ex.text_b or "" for ex in examples], max_length=max_length)
    result = {}
    for pooling in POOLINGS:
        norms = np.linalg.norm(a[pooling], axis=1) * np.linalg.norm(b[pooling], axis=1)
        result[pooling] = (a[pooling] * b[pooling]).sum(1) / np.where(norms > 0, norms, 1.0)
    return result


class Probe:
    """A linear model on frozen features for one label shape: a kind names its probe (`TaskKind.probe`), which
    gives the kind's no-training baselines and its LP-FT head start (`mtbio.training.lp_start`)."""

    def baselines(self, task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                  scored: Sequence[Example], max_length: int) -> dict[str, list[Label]]:
        """{baseline name: predictions for `scored`} from models fitted on `train`'s frozen features."""
        raise NotImplementedError

    def fit_predict(self, task: TaskDef, train_x: np.ndarray, train_y: Sequence[Label], x: np.ndarray) -> list[Label]:
        """A linear model fitted on (train_x, train_y), its predictions for `x` in the task's label space."""
        raise NotImplementedError

    def head_weights(self, x: np.ndarray, y: np.ndarray, outputs: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(weight [outputs, hidden], bias [outputs]) of a head's output layer fitted on its frozen inputs `x` and
        featurized labels `y`; None when the labels give nothing to fit."""
        raise NotImplementedError


class SentenceProbe(Probe):
    """One prediction per example: the pair cosines (pair tasks) and a probe on mean-pooled features."""

    def baselines(self, task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                  scored: Sequence[Example], max_length: int) -> dict[str, list[Label]]:
        found: dict[str, list[Label]] = {}
        labels, pair = [e.label for e in train], is_pair_task(task)
        if pair:
            fit_cosines = cosines(encoder, tokenizer, train, max_length)
            scored_cosines = cosines(encoder, tokenizer, scored, max_length)
            for pooling in POOLINGS:
                found[f"cosine-{pooling}"] = self.fit_predict(task, fit_cosines[pooling][:, None], labels,
                                                              scored_cosines[pooling][:, None])

        def features(examples: Sequence[Example]) -> np.ndarray:
            return embed(encoder, tokenizer, [ex.text or "" for ex in examples],
                         [ex.text_b or "" for ex in examples] if pair else None, pooling=PROBE_POOLING,
                         max_length=max_length, window=task.sliding_window)

        found["probe"] = self.fit_predict(task, features(train), labels, features(scored))
        return found


class ClassProbe(SentenceProbe):
    """One class: a (multinomial) logistic regression, the same fit as the head start."""

    def fit_predict(self, task: TaskDef, train_x: np.ndarray, train_y: Sequence[Label], x: np.ndarray) -> list[Label]:
        return class_model(train_x, [str(y) for y in train_y], task.label_list)(x)  # type: ignore[return-value]

    def head_weights(self, x: np.ndarray, y: np.ndarray, outputs: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A logistic regression over the label indices (positions labelled IGNORE_INDEX left out); a class the
        training set never shows gets a bias below every fitted logit."""
        from sklearn.linear_model import LogisticRegression

        weight, bias = np.zeros((outputs, x.shape[1])), np.zeros(outputs)
        keep = y != IGNORE_INDEX
        x, y = x[keep], y[keep].astype(np.int64)
        classes = np.unique(y)
        if len(classes) < 2:
            return None
        model = LogisticRegression(max_iter=2000).fit(x, y)
        bias[:] = ABSENT_BIAS + float(np.min(model.intercept_))
        if len(classes) == 2:  # one row: the second class's logit against a first fixed at 0 (the same softmax)
            bias[classes[0]] = 0.0
            weight[classes[1]], bias[classes[1]] = model.coef_[0], model.intercept_[0]
        else:
            weight[classes], bias[classes] = model.coef_, model.intercept_
        return weight, bias


class ClassSetProbe(SentenceProbe):
    """A set of classes: one logistic regression per label (a label always or never present: predicted so)."""

    def fit_predict(self, task: TaskDef, train_x: np.ndarray, train_y: Sequence[Label], x: np.ndarray) -> list[Label]:
        names = task.label_list
        hot = np.array([[name in (y or []) for name in names] for y in train_y], dtype=np.float64)  # type: ignore[operator]
        weight, bias = self.head_weights(train_x, hot.reshape(len(train_y), len(names)), len(names))
        positive = x @ weight.T + bias > 0  # the head start's decision at the 0.5 threshold
        return [[names[j] for j in np.flatnonzero(row)] for row in positive]  # type: ignore[misc]

    def head_weights(self, x: np.ndarray, y: np.ndarray, outputs: int) -> tuple[np.ndarray, np.ndarray] | None:
        from sklearn.linear_model import LogisticRegression

        weight, bias = np.zeros((outputs, x.shape[1])), np.zeros(outputs)
        for label in range(outputs):
            target = y[:, label] > 0.5 if y.ndim == 2 else np.zeros(len(x), bool)
            if target.all() or not target.any():
                bias[label] = -ABSENT_BIAS if target.all() else ABSENT_BIAS
                continue
            model = LogisticRegression(max_iter=2000).fit(x, target)
            weight[label], bias[label] = model.coef_[0], model.intercept_[0]
        return weight, bias


class NumberProbe(SentenceProbe):
    """A number: a linear regression on one feature (a cosine), a ridge regression on many."""

    def fit_predict(self, task: TaskDef, train_x: np.ndarray, train_y: Sequence[Label], x: np.ndarray) -> list[Label]:
        found = self.head_weights(train_x, np.array([float(y) for y in train_y]), 1)  # type: ignore[arg-type]
        assert found is not None
        return [float(v) for v in x @ found[0][0] + found[1][0]]

    def head_weights(self, x: np.ndarray, y: np.ndarray, outputs: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A linear regression on one feature (a cosine: unregularised, so its scale is the labels'), a ridge
        regression on many."""
        from sklearn.linear_model import LinearRegression, Ridge

        weight, bias = np.zeros((outputs, x.shape[1])), np.zeros(outputs)
        keep = np.isfinite(y.astype(np.float64))
        model = LinearRegression() if x.shape[1] == 1 else Ridge(alpha=1.0)
        model.fit(x[keep], y[keep].astype(np.float64))
        weight[0], bias[0] = model.coef_, model.intercept_
        return weight, bias


class TagProbe(ClassProbe):
    """A tag per word: the token-level probe (`tag_probe`); its head start is the class probe's over words."""

    def baselines(self, task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                  scored: Sequence[Example], max_length: int) -> dict[str, list[Label]]:
        return {"probe": tag_probe(encoder, tokenizer, train, scored, max_length,  # type: ignore[dict-item]
                                   task.sliding_window, task.label_list)}


def no_training_scores(task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                       scored: Sequence[Example], max_length: int | None = None) -> dict[str, dict[str, float]]:
    """{baseline name: `score_task` result on `scored`} for every baseline the task's kind has (none for a kind
    without a probe, rather than a probe that guesses its labels are classes)."""
    probe = task.kind.probe
    if probe is None:
        return {}
    gold, groups = [ex.label for ex in scored], [ex.group for ex in scored]
    found = probe.baselines(task, encoder, tokenizer, train, scored, max_length or task.max_length)
    return {name: score_task(task, gold, predictions, groups) for name, predictions in found.items()}
