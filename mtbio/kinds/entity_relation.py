"""Relation classification from entity markers: the hidden states where the two marked entities start,
concatenated → dropout → linear, cross-entropy (the "entity start" representation of Baldini Soares et al.
2019, which beats reading [CLS] on relation extraction).

BLURB's relation tasks mark the pair in the text (ChemProt here: `<< chemical >>`, `[[ protein ]]`; DDI:
`@DRUG$` twice; GAD: `@GENE$`, `@DISEASE$`). `type_options: {markers: [FIRST, SECOND]}` names the text that
opens each entity; the same string twice means its first and second occurrence. Featurization adds
`entity_positions` (the token where each marker starts; [CLS] where truncation cut it off). A text without
both markers is an error naming its line, unless `missing: cls` reads [CLS] for it (DDI marks 54 of its
33,508 pairs with one merged `@DRUG-DRUG$`). Labels,
metrics and the trivial predictor are single-label classification's. No `AutoModelFor*` class carries this
head, so `mtbio export` refuses it; `mtbio.load` and `mtbio predict` serve it. Its no-training probe reads what the
head reads (the two entity starts of the frozen encoder), so an LP-FT start scores what the probe scores.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from pydantic import BaseModel, ConfigDict, Field

from mtbio.data.example import Example
from mtbio.data.featurize import text_columns
from mtbio.data.readers import is_pair_task
from mtbio.errors import DataFormatError
from mtbio.kinds.classification import SingleLabel, class_labels
from mtbio.model.probes import ClassProbe
from mtbio.tasks.kinds import register_kind
from mtbio.tasks.schema import TaskDef

if TYPE_CHECKING:
    from mtbio.kinds.heads.entity_relation import EntityStartHead
    from mtbio.model.heads import HeadConfig

log = logging.getLogger(__name__)


class MarkerOptions(BaseModel):
    """`type_options` of an entity_relation task."""

    model_config = ConfigDict(extra="forbid")

    markers: tuple[str, str] = Field(description="the text that opens the first and the second entity")
    missing: Literal["error", "cls"] = Field("error", description="a text without both markers: an error, or [CLS]")


def marker_starts(text: str, markers: tuple[str, str]) -> tuple[int, int]:
    """Character offsets where the two markers start (the same marker twice: its first two occurrences); -1 if absent."""
    first = text.find(markers[0])
    after = first + len(markers[0]) if markers[0] == markers[1] and first >= 0 else 0
    return first, text.find(markers[1], after)


def entity_vectors(encoder: Any, tokenizer: Any, examples: Sequence[Example], task: TaskDef, max_length: int,
                   batch_size: int = 64) -> np.ndarray:
    """The frozen encoder's hidden states at the two entity starts of each example, concatenated (float64), as the
    head reads them."""
    import torch

    columns = task.kind.featurize(examples, task, tokenizer, max_length)
    names = [key for key in ("input_ids", "attention_mask", "token_type_ids") if key in columns]
    rows = []
    encoder.eval()
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            part = slice(start, start + batch_size)
            padded = tokenizer.pad({key: columns[key][part] for key in names}, return_tensors="pt")
            hidden = encoder(**padded).last_hidden_state.float()
            positions = torch.tensor(columns["entity_positions"][part])
            rows.append(hidden[torch.arange(hidden.shape[0])[:, None], positions].flatten(1).double().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 2 * int(encoder.config.hidden_size)))


class EntityProbe(ClassProbe):
    """A logistic regression on the frozen entity-start vectors: the relation head's features."""

    def baselines(self, task: TaskDef, encoder: Any, tokenizer: Any, train: Sequence[Example],
                  scored: Sequence[Example], max_length: int) -> dict[str, list[Any]]:
        fit = entity_vectors(encoder, tokenizer, train, task, max_length)
        return {"probe": self.fit_predict(task, fit, [ex.label for ex in train],
                                          entity_vectors(encoder, tokenizer, scored, task, max_length))}


@register_kind
class EntityRelation(SingleLabel):
    name = "entity_relation"
    probe = EntityProbe()
    pools = False
    default_metric = "micro_f1"
    options = MarkerOptions

    def check(self, task: TaskDef) -> list[str]:
        problems = []
        if task.entity_markers == "strip":
            problems.append("entity_markers: an entity_relation task reads its markers; use entity_markers: keep")
        if is_pair_task(task):
            problems.append("columns: an entity_relation task reads one text holding both marked entities (no text_b)")
        return problems

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import List, Value

        return {"labels": Value("int64"), "entity_positions": List(Value("int32"), length=2)}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, encoded = text_columns(chunk, task, tokenizer, max_length, offsets=True)
        options = self.options_of(task)
        positions, lost, absent = [], 0, 0
        for i, ex in enumerate(chunk):
            starts = marker_starts(ex.text or "", options.markers)
            if min(starts) < 0 and options.missing == "error":
                raise DataFormatError(ex.origin or ex.uid, None, f"task '{task.name}': example '{ex.uid}' does not hold "
                                      f"both entity markers {list(options.markers)} (type_options.missing: cls reads "
                                      "[CLS] for such texts)")
            absent += sum(start < 0 for start in starts)
            tokens = [encoded.char_to_token(i, start) if start >= 0 else 0 for start in starts]
            lost += sum(token is None for token in tokens)
            positions.append([0 if token is None else token for token in tokens])
        if lost or absent:
            log.warning("%s: %d entity marker(s) cut off by truncation at %d tokens, %d absent; those read [CLS]",
                        task.name, lost, max_length, absent)
        columns["labels"] = class_labels(chunk, task)
        columns["entity_positions"] = positions
        return columns

    def head(self, config: HeadConfig) -> EntityStartHead:
        from mtbio.kinds.heads.entity_relation import EntityStartHead

        return EntityStartHead(config)
