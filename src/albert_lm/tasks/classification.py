"""Sequence classification and regression: the one class behind every GLUE task (a table of specs in
`albert_lm.tasks.glue`) and the user's own CSV/TSV/JSONL data (`albert_lm.tasks.custom`).

Inputs are ``[CLS] a [SEP] (b [SEP])`` (`albert_lm.tasks.inputs.encode_text_pairs`); the head is pooled ->
dropout -> dense (num_labels, or 1 with MSE for regression), `albert_lm.model.AlbertForSequenceClassification`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm.tasks import metrics as M
from albert_lm.tasks.base import Example, Task, TaskDataError, per_example
from albert_lm.tasks.collate import Feature
from albert_lm.tasks.inputs import encode_text_pairs

ReadFn = Callable[[str], list[Example]]


class ClassificationTask(Task):
    """Single-sentence or sentence-pair classification (``labels`` given) or regression (``labels`` None),
    with the examples coming from a reader function."""

    kinds = ("classification", "regression")
    head_outputs: ClassVar[dict[str, tuple[str, ...]]] = {"classification": ("logits",)}

    def __init__(
        self,
        name: str,
        reader: ReadFn,
        labels: Sequence[str] | None,
        metric_names: Sequence[str],
        *,
        dev_splits: Sequence[str] = ("dev",),
        test_splits: Sequence[str] = (),
        positive_label: str | None = None,
        text_fields: int = 1,
    ) -> None:
        self.name = name
        self.text_fields = text_fields
        self._reader = reader
        self.labels = list(labels) if labels is not None else None
        self.kind = "classification" if labels is not None else "regression"
        self.metric_names = tuple(metric_names)
        self.dev_splits = tuple(dev_splits)
        self.test_splits = tuple(test_splits)
        # F1 is of this class (GLUE MRPC / QQP: "1")
        self.positive_label: str | None = positive_label
        if positive_label is None and self.labels:
            self.positive_label = self.labels[-1]
        # the training data's column names (custom data), the default input fields of `albert predict`
        self.columns: dict[str, str | None] = {}

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> ClassificationTask:
        name = str(info["task"])

        def no_data(split: str) -> list[Example]:
            raise FileNotFoundError(f"{name}: a task rebuilt from task.json has no {split} data")

        task = cls(
            name,
            no_data,
            info.get("labels") if info["kind"] == "classification" else None,
            info.get("metric_names", ["accuracy"]),
            text_fields=int(info.get("text_fields", 1)),
        )
        task.columns = dict(info.get("columns") or {})
        return task

    @property
    def num_labels(self) -> int:
        return len(self.labels) if self.labels is not None else 1

    def read(self, split: str) -> list[Example]:
        return self._reader(split)

    def label_id(self, label: Any) -> int | float:
        if self.labels is None:
            return float(label)
        return self.labels.index(label)

    def featurize(
        self, examples: Sequence[Example], tokenizer: Any, max_length: int, num_workers: int = 1
    ) -> list[Feature]:
        """``[CLS] a [SEP] (b [SEP])``, all texts in one tokenizer call (``num_workers`` threads)."""
        pairs = [len(ex.texts) > 1 for ex in examples]
        if any(pairs) and not all(pairs):
            raise ValueError("a batch mixes single texts and text pairs")
        encoded = encode_text_pairs(
            tokenizer,
            [ex.texts[0] for ex in examples],
            [ex.texts[1] for ex in examples] if any(pairs) else None,
            max_length,
            num_workers,
        )
        features = []
        for i, (ex, (ids, types)) in enumerate(zip(examples, encoded)):
            feat: Feature = {"input_ids": ids, "token_type_ids": types, "example_index": i}
            if ex.label is not None:
                feat["labels"] = self.label_id(ex.label)
            features.append(feat)
        return features

    def build_model(self, init: str | Path, *, require_head: bool = False, **config_overrides: Any) -> Any:
        from albert_lm.model import AlbertForSequenceClassification

        model = AlbertForSequenceClassification.from_pretrained(
            init, num_labels=self.num_labels, require_head=require_head, **config_overrides
        )
        if self.labels is not None:
            model.label_names = list(self.labels)  # type: ignore[assignment]  # -> config.json id2label
        return model

    def postprocess(
        self,
        outputs: Sequence[Mapping[str, np.ndarray]],
        examples: Sequence[Example],
        features: Sequence[Feature],
    ) -> list[dict[str, Any]]:
        return per_example(outputs, examples, features, self._record)

    def _record(self, out: Mapping[str, np.ndarray], feat: Feature, example: Example) -> dict[str, Any]:
        logits = np.asarray(out["logits"], dtype=np.float64)
        rec: dict[str, Any] = {"guid": example.guid}
        if self.labels is None:
            rec["score"] = float(logits.reshape(-1)[0])
        else:
            probs = M.softmax(logits)
            rec["label"] = self.labels[int(np.argmax(probs))]
            rec["probabilities"] = {name: float(p) for name, p in zip(self.labels, probs)}
        return rec

    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, float]:
        gold = [ex.label for ex in examples]
        if any(g is None for g in gold):
            raise ValueError(f"{self.name}: cannot compute metrics on unlabelled examples")
        out: dict[str, float] = {}
        if self.labels is None:
            pred_scores = np.array([p["score"] for p in predictions], dtype=np.float64)
            gold_scores = np.array(gold, dtype=np.float64)
            for name in self.metric_names:
                out[name] = M.METRICS[name](pred_scores, gold_scores)
            return out
        pred = np.array([p["label"] for p in predictions], dtype=object)
        gold_arr = np.array(gold, dtype=object)
        for name in self.metric_names:
            if name == "f1":
                out[name] = M.f1_binary(pred, gold_arr, positive=self.positive_label)
            else:
                out[name] = M.METRICS[name](pred, gold_arr)
        return out

    def info(self) -> dict[str, Any]:
        return {**super().info(), "labels": self.labels, "text_fields": self.text_fields}

    # ------------------------------------------------------------------------------------ albert predict
    def request_fields(self) -> tuple[str, ...]:
        return ("pairs", "items") if self.text_fields == 2 else ("texts", "items")

    def predict_examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int],
        source: str,
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """Text lines (``text`` or, for pair models, ``text<TAB>pair``) or JSON objects with the text in
        ``text_field`` (default: the training column, else ``text``) and ``pair_field``."""
        text_field = text_field or self.columns.get("text") or "text"
        pair_field = pair_field or self.columns.get("text_pair") or "text_pair"
        pairs = self.text_fields == 2
        examples = []
        for rec, n in zip(records, numbers):
            if "_texts" in rec:
                texts = list(rec["_texts"])
                if pairs and len(texts) != 2:
                    raise TaskDataError(
                        f"{source}:{n}: a sentence-pair model needs text<TAB>pair, got {len(texts)} field(s)"
                    )
                if not pairs:
                    texts = ["\t".join(texts)]
            else:
                if text_field not in rec:
                    raise TaskDataError(f"{source}:{n}: no field {text_field!r} (use --text-field)")
                texts = [str(rec[text_field])]
                if pairs:
                    if pair_field not in rec:
                        raise TaskDataError(
                            f"{source}:{n}: no field {pair_field!r} for the second text (use --pair-field)"
                        )
                    texts.append(str(rec[pair_field]))
            examples.append(Example(str(rec.get("id", n)), tuple(texts), None, {}))
        return examples

    def output_row(self, example: Example, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """``{"text"[, "text_pair"], "label", "probabilities"}``; regression: ``{"text", ..., "score"}``."""
        row: dict[str, Any] = {"text": example.texts[0]}
        if len(example.texts) > 1:
            row["text_pair"] = example.texts[1]
        row.update({k: v for k, v in prediction.items() if k != "guid"})
        return row
