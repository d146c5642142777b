"""The span-extraction kind (extractive QA), added as one module: spans from answers, the decoding rule, its
metrics by hand, and a run end to end on the fixture (train, score, predict the answer's text in a new process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mtbio.kinds.heads.span_extraction import SpanHead
from mtbio.kinds.span_extraction import MAX_ANSWER_TOKENS, OUTSIDE, answer_span, span_exact, span_f1, token_span
from mtbio.model.heads import HeadConfig
from mtbio.tasks.loading import load_task_def

FIXTURE = Path(__file__).parent / "fixtures" / "span_qa"


def test_an_answer_is_a_character_span_of_the_context_found_or_checked() -> None:
    context = "Aspirin 81 mg was started. Aspirin was stopped."
    assert answer_span("Aspirin", context) == [0, 7]  # the first place
    assert answer_span({"text": "Aspirin", "start": 27}, context) == [27, 34]
    with pytest.raises(ValueError, match="not at character 3"):
        answer_span({"text": "Aspirin", "start": 3}, context)
    with pytest.raises(ValueError, match="'heparin' is not in the context"):
        answer_span("heparin", context)


def test_a_span_becomes_its_first_and_last_token_or_cls_when_cut_off() -> None:
    starts, ends = [OUTSIDE, OUTSIDE, 0, 8, 11, 14, OUTSIDE], [OUTSIDE, OUTSIDE, 7, 10, 13, 21, OUTSIDE]
    assert token_span([8, 13], starts, ends) == [3, 4]
    assert token_span([9, 12], starts, ends) == [3, 4]  # partial tokens count
    assert token_span([14, 40], starts, ends) == [0, 0]  # runs past the window: [CLS]
    assert token_span(None, starts, ends) == [-100, -100]


def test_decoding_takes_the_best_span_inside_the_context_and_not_longer_than_the_limit() -> None:
    head = SpanHead(HeadConfig(task="qa", type="span_extraction", hidden_size=4, labels=["start", "end"]), OUTSIDE,
                    MAX_ANSWER_TOKENS)
    width = MAX_ANSWER_TOKENS + 10
    starts = torch.tensor([[OUTSIDE, OUTSIDE] + [10 * i for i in range(width - 2)]])
    batch = {"offset_start": starts, "offset_end": torch.where(starts == OUTSIDE, starts, starts + 5)}
    logits = torch.zeros(1, width, 2)
    logits[0, 1] = 50.0  # the question's token scores highest for both: outside the context, never chosen
    logits[0, 3, 0], logits[0, 6, 1] = 5.0, 4.0
    assert head.decode(logits, batch) == [[10, 45]]  # tokens 3..6 → characters 10..45
    logits[0, 6, 1], logits[0, 3 + MAX_ANSWER_TOKENS, 1] = 0.0, 9.0  # an end too far from the start
    first, last, _ = head._best(logits, batch)[0]
    assert last - first < MAX_ANSWER_TOKENS


def test_span_metrics_by_hand() -> None:
    task = load_task_def(FIXTURE / "clinical-qa.yml")
    gold, pred = [[0, 10], [5, 9], [0, 4]], [[5, 15], [5, 9], [6, 8]]
    assert span_f1(gold, pred, task) == pytest.approx((0.5 + 1.0 + 0.0) / 3)  # 5 of 10 characters each way; exact; none
    assert span_exact(gold, pred, task) == pytest.approx(1 / 3)


def test_the_kind_trains_scores_and_predicts_answer_text_in_a_new_process(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.finetune import finetune
    from mtbio.training.config import RunConfig

    task = load_task_def(FIXTURE / "clinical-qa.yml")
    assert task.metric == "span_f1" and not task.kind.pools and task.kind.probe is None
    config = RunConfig(tasks=["clinical-qa"], task_defs=[str(FIXTURE)], data_dir=str(FIXTURE), encoder=tiny_encoder,
                       epochs=1, batch_size=32, lr=1e-3, output=str(tmp_path / "run"), mixed_precision="no", seed=1,
                       recipe="mt-bert")
    [(run_dir, results)] = finetune(config)
    scores = json.loads((run_dir / "results.json").read_text())
    dev = scores["dev"]["clinical-qa"] if "dev" in scores else scores["scores"]["dev"]["clinical-qa"]
    assert 0.0 <= dev["span_f1"] <= 1.0 and 0.0 <= dev["span_exact"] <= dev["span_f1"]
    context = "He received warfarin 5 mg twice a day. A 70-year-old man presented with atrial fibrillation."
    (tmp_path / "in.txt").write_text(f"Which drug was started?\t{context}\n")
    out = tmp_path / "out.jsonl"
    subprocess.run([sys.executable, "-m", "mtbio", "predict", str(run_dir), "--task", "clinical-qa", "--input",
                    str(tmp_path / "in.txt"), "--output", str(out)], check=True, capture_output=True)
    record = json.loads(out.read_text())
    start, end = record["prediction"]
    assert 0 <= start <= end <= len(context) and record["answer"] == context[start:end]
