"""SQuAD 1.1 / 2.0 as a task of the fine-tuning framework: the presets, `SquadTask`, and its command-line
hooks.

Reading, featurization and collation are `albert_lm.tasks.squad_data`; n-best spans, no-answer odds and the
official files `albert_lm.tasks.squad_postprocess`; the official metrics `albert_lm.tasks.squad_metric`. The
task puts them together: examples carry their `SquadExample` (``meta["squad"]``), features their
`SquadFeature` (``feature["squad"]``), prediction records are those of `Predictions.records`, and
`compute_metrics` is the official evaluation of them (SQuAD 2.0: at the no-answer threshold with the best
F1 on the split unless one is fixed; `apply_metrics` settles the records' answers at that threshold and
`calibrate` keeps it for the saved model).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm.tasks import squad_metric as SM
from albert_lm.tasks import squad_postprocess as P
from albert_lm.tasks.base import Example, Task, TaskDataError
from albert_lm.tasks.squad_data import (
    ANSWER_START_POLICIES,
    DOC_STRIDE,
    MAX_QUERY_LENGTH,
    FeaturizeReport,
    SquadExample,
    collate,
    featurize,
)
from albert_lm.tasks.squad_rows import read_squad_file

logger = logging.getLogger(__name__)

# google-research/albert README, fine-tuning hyperparameter table (also the paper's appendix A.4):
#   SQuAD v1.1: LR 5e-5, BSZ 48, ALBERT DR 0, Classifier DR 0.1, TS 3649, WS 365, MSL 384
#   SQuAD v2.0: LR 3e-5, BSZ 48, ALBERT DR 0, Classifier DR 0.1, TS 8144, WS 814, MSL 512
PRESETS: dict[str, dict[str, Any]] = {
    "1.1": dict(
        learning_rate=5e-5,
        batch_size=48,
        train_steps=3649,
        warmup_steps=365,
        max_seq_length=384,
        encoder_dropout=0.0,
        classifier_dropout=0.1,
        eval_batch_size=32,
    ),
    "2.0": dict(
        learning_rate=3e-5,
        batch_size=48,
        train_steps=8144,
        warmup_steps=814,
        max_seq_length=512,
        encoder_dropout=0.0,
        classifier_dropout=0.1,
        eval_batch_size=32,
    ),
}


VERIFIER_ONLY_INPUTS = ("p_mask", "is_impossible")
"""Batch keys (`albert_lm.tasks.squad_data.collate`) that only the answer-verifier head reads."""

HEADS = ("verifier", "span")
"""SQuAD 2.0 heads: ALBERT's answer verifier (`albert_lm.model.squad_head`) or the BERT-style span head with
the [CLS] null score."""


class SquadTask(Task):
    """SQuAD 1.1 / 2.0 as a task of the fine-tuning framework (`albert_lm.tasks.base.Task`).

    Args:
        version: "1.1" (span head, EM / F1) or "2.0" (no-answer questions; HasAns / NoAns, best_* too).
        files: split name -> SQuAD JSON file (``train``, ``dev``, ``test``; any subset).
        head: for 2.0, "verifier" (ALBERT's own head) or "span" (BERT-style null score); 1.1 uses "span".
        doc_stride, max_query_length, answer_start_policy: featurization, see `squad_data.featurize`.
        n_best_size, max_answer_length: post-processing, see `albert_lm.tasks.squad_postprocess`.
        null_threshold: 2.0 only: answer "" when ``null_odds > null_threshold``; None chooses it on the
            labelled split being evaluated (best F1, as the original's ``evaluate_v2``), a number fixes it
            (e.g. for a test set, the value chosen on dev).
    """

    name = "squad"
    kind = "span"
    kinds = ("span",)
    # SQuAD 1.1 and the span head of 2.0 read the span logits; the answer verifier the beam of
    # `albert_lm.model.squad_head`
    head_outputs: ClassVar[dict[str, tuple[str, ...]]] = {
        "question_answering": ("start_logits", "end_logits"),
        "squad_v2": (
            "start_top_log_probs",
            "start_top_index",
            "end_top_log_probs",
            "end_top_index",
            "cls_logits",
        ),
    }
    train_split = "train"

    def __init__(
        self,
        version: str = "1.1",
        files: dict[str, str | Path] | None = None,
        *,
        head: str = "verifier",
        doc_stride: int = DOC_STRIDE,
        max_query_length: int = MAX_QUERY_LENGTH,
        n_best_size: int = 20,
        max_answer_length: int = 30,
        null_threshold: float | None = None,
        answer_start_policy: str = "nearest",
    ) -> None:
        if version not in ("1.1", "2.0"):
            raise ValueError(f"SQuAD version must be 1.1 or 2.0, got {version!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        self.version = version
        self.head = head if version == "2.0" else "span"
        self.files = {k: Path(v) for k, v in (files or {}).items()}
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.null_threshold = null_threshold
        self.chosen_threshold: float | None = None
        self.answer_start_policy = answer_start_policy
        self.metric_names = ("exact_match", "f1") if version == "1.1" else ("exact", "f1")
        self.dev_splits = ("dev",) if "dev" in self.files else ()
        self.test_splits = ("test",) if "test" in self.files else ()
        self.reports: dict[str, FeaturizeReport] = {}

    # ------------------------------------------------------------------------------------- data
    def read(self, split: str) -> list[Example]:
        if split not in self.files:
            raise FileNotFoundError(f"squad: no file for the {split} split (give --{split}-file)")
        data = read_squad_file(self.files[split])
        if data.version == "2.0" and self.version == "1.1" and any(e.is_impossible for e in data.examples):
            logger.warning("%s has unanswerable questions but the task is SQuAD 1.1", self.files[split])
        return [
            Example(e.qas_id, (e.question, e.context), e.answer_texts, {"squad": e, "split": split})
            for e in data.examples
        ]

    def featurize(self, examples: Sequence[Any], tokenizer: Any, max_length: int) -> list[dict[str, Any]]:
        squad = [ex.meta["squad"] if "squad" in ex.meta else _as_squad_example(ex) for ex in examples]
        training = bool(examples) and all(ex.meta.get("split") == self.train_split for ex in examples)
        feats, report = featurize(
            squad,
            tokenizer,
            max_seq_length=max_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            is_training=training,
            answer_start_policy=self.answer_start_policy,
        )
        report.log()
        self.reports[examples[0].meta.get("split", "input") if examples else "input"] = report
        return [
            {
                "input_ids": f.input_ids,
                "token_type_ids": f.token_type_ids,
                "example_index": f.example_index,
                "squad": f,
            }
            for f in feats
        ]

    def collate(self, features: Sequence[Any], pad_id: int = 0, pad_to: int | None = None) -> dict[str, Any]:
        batch = collate([f["squad"] for f in features], pad_id, pad_to=pad_to)
        if self.head == "span":  # the BERT-style span head takes neither (the null score is [CLS]'s)
            batch = {k: v for k, v in batch.items() if k not in VERIFIER_ONLY_INPUTS}
        return batch

    # ------------------------------------------------------------------------------------ model
    def build_model(self, init: str | Path, *, require_head: bool = False, **config_overrides: Any) -> Any:
        if self.head == "verifier":
            from albert_lm.model.squad_head import AlbertForSquadV2

            return AlbertForSquadV2.from_pretrained(init, require_head=require_head, **config_overrides)
        from albert_lm.model import AlbertForQuestionAnswering

        return AlbertForQuestionAnswering.from_pretrained(init, require_head=require_head, **config_overrides)

    # ------------------------------------------------------------------------------ predictions
    def postprocess(
        self, outputs: Sequence[Any], examples: Sequence[Any], features: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """`Predictions.records` of the examples, answered at the fixed or the chosen (on dev) no-answer
        threshold (SQuAD 2.0)."""
        squad_examples = [
            ex.meta["squad"] if "squad" in ex.meta else _as_squad_example(ex) for ex in examples
        ]
        feats = [f["squad"] for f in features]
        preds: P.Predictions
        if self.head == "verifier":
            v2 = [
                P.V2Result(
                    f.unique_id,
                    np.asarray(o["start_top_log_probs"]),
                    np.asarray(o["start_top_index"]).astype(np.int64),
                    np.asarray(o["end_top_log_probs"]),
                    np.asarray(o["end_top_index"]).astype(np.int64),
                    float(np.asarray(o["cls_logits"])),
                )
                for o, f in zip(outputs, feats)
            ]
            preds = P.postprocess_v2(
                squad_examples,
                feats,
                v2,
                n_best_size=self.n_best_size,
                max_answer_length=self.max_answer_length,
            )
        else:
            spans = [
                P.SpanResult(
                    f.unique_id,
                    np.asarray(o["start_logits"])[: len(f.input_ids)],
                    np.asarray(o["end_logits"])[: len(f.input_ids)],
                )
                for o, f in zip(outputs, feats)
            ]
            preds = P.postprocess_span(
                squad_examples,
                feats,
                spans,
                n_best_size=self.n_best_size,
                max_answer_length=self.max_answer_length,
                null_score=self.version == "2.0",
            )
        threshold = self.null_threshold if self.null_threshold is not None else self.chosen_threshold
        by_id = {r["guid"]: r for r in preds.records(threshold if self.version == "2.0" else None)}
        return [dict(by_id[ex.qas_id]) for ex in squad_examples]

    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Any]
    ) -> dict[str, float]:
        """v1.1: ``exact_match``, ``f1``. v2.0: the official v2 dict at the no-answer threshold (chosen here
        for best F1 unless fixed), plus ``null_threshold`` and ``threshold_chosen`` (1.0: chosen on this
        split, 0.0: fixed). Changes neither the records nor the task (see `apply_metrics`, `calibrate`)."""
        golds = {ex.guid: list(ex.label) for ex in examples}
        if self.version == "1.1":
            return SM.evaluate_v1(golds, {p["guid"]: p["prediction"] for p in predictions})
        best = {p["guid"]: p["best_span"] for p in predictions}
        odds = {p["guid"]: float(p["null_odds"]) for p in predictions}
        spans = P.Predictions(best, {}, odds)
        threshold = self.null_threshold
        if threshold is None:
            threshold = P.choose_threshold(spans, golds)
        out = SM.evaluate_v2(golds, spans.answers(threshold))
        full = SM.evaluate_v2(golds, best, odds)
        out.update({k: v for k, v in full.items() if k.startswith("best_")})
        out.update(null_threshold=float(threshold), threshold_chosen=float(self.null_threshold is None))
        return {k: float(v) for k, v in out.items()}

    def apply_metrics(
        self, predictions: Sequence[Mapping[str, Any]], metrics: Mapping[str, float]
    ) -> list[dict[str, Any]]:
        """SQuAD 2.0: the records answered at the threshold the metrics were computed at."""
        if self.version == "1.1" or "null_threshold" not in metrics:
            return super().apply_metrics(predictions, metrics)
        threshold = metrics["null_threshold"]
        return [
            {**p, "prediction": "" if p["null_odds"] > threshold else p["best_span"]} for p in predictions
        ]

    def calibrate(self, metrics: Mapping[str, float]) -> None:
        """SQuAD 2.0 without a fixed threshold: keep the one chosen on dev (for unlabelled splits, for
        task.json and so for `albert predict`)."""
        if self.version == "2.0" and self.null_threshold is None and "null_threshold" in metrics:
            self.chosen_threshold = float(metrics["null_threshold"])

    def score(self, metrics: Any) -> float:
        """F1 selects the best checkpoint (the original keeps the checkpoint with the best dev F1)."""
        return float(metrics["f1"])

    def info(self) -> dict[str, Any]:
        threshold = self.null_threshold if self.null_threshold is not None else self.chosen_threshold
        return {
            **super().info(),
            "version": self.version,
            "head": self.head,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "n_best_size": self.n_best_size,
            "max_answer_length": self.max_answer_length,
            "null_threshold": threshold,
            "null_threshold_source": "fixed"
            if self.null_threshold is not None
            else "chosen on dev (best F1)",
            # what featurization did per split, exceptions counted (also in report.json)
            "featurization": {split: r.summary() for split, r in self.reports.items()},
        }

    @classmethod
    def from_info(cls, info: Mapping[str, Any], files: dict[str, str | Path] | None = None) -> SquadTask:
        """The task a fine-tuned model was trained with (its task.json), e.g. for `albert predict`; the
        no-answer threshold chosen on dev becomes a fixed one."""
        return cls(
            str(info.get("version", "1.1")),
            files,
            head=str(info.get("head", "span")),
            doc_stride=int(info.get("doc_stride", DOC_STRIDE)),
            max_query_length=int(info.get("max_query_length", MAX_QUERY_LENGTH)),
            n_best_size=int(info.get("n_best_size", 20)),
            max_answer_length=int(info.get("max_answer_length", 30)),
            null_threshold=info.get("null_threshold"),
        )

    def writes_submission(self, split: str) -> bool:
        return True  # the official evaluate-v1.1 / v2.0 scripts read predictions.json for dev as well

    def write_test_predictions(
        self, split: str, predictions: Sequence[Mapping[str, Any]], out_dir: Path
    ) -> Path:
        return P.write_official_files(predictions, out_dir / split)

    @classmethod
    def read_labelled(
        cls, info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
    ) -> list[Example]:
        """A SQuAD JSON file."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such file")
        return cls.from_info(info, files={"dev": path}).read("dev")

    # ------------------------------------------------------------------------------------ albert predict
    def request_fields(self) -> tuple[str, ...]:
        return ("pairs", "items")

    def predict_examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int],
        source: str,
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """JSON objects ``{"question", "context"[, "id"]}`` or text lines ``question<TAB>context``."""
        out = []
        for rec, n in zip(records, numbers):
            if "_texts" in rec:
                if len(rec["_texts"]) != 2:
                    raise TaskDataError(
                        f"{source}:{n}: expected question<TAB>context, got {len(rec['_texts'])} field(s)"
                    )
                question, context = rec["_texts"]
            else:
                question, context = rec.get("question"), rec.get("context")
                if not isinstance(question, str) or not isinstance(context, str):
                    raise TaskDataError(
                        f"{source}:{n}: a question-answering input needs 'question' and 'context'"
                    )
            qid = str(rec.get("id", n))
            squad = SquadExample(qid, question, context, [])
            out.append(Example(qid, (question, context), None, {"squad": squad}))
        return out

    def output_row(self, example: Example, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """``{"question", "answer"`` ("" = no answer), ``"probability"[, "null_odds"]}``."""
        best = prediction["nbest"][0] if prediction["nbest"] else {}
        row = {"question": example.texts[0], "answer": prediction["prediction"]}
        row["probability"] = best.get("probability")
        if "null_odds" in prediction:
            row["null_odds"] = prediction["null_odds"]
        return row

    # ------------------------------------------------------------------------------------ command line
    cli_help = "SQuAD 1.1 / 2.0 extractive question answering from the official JSON files"

    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        """The SQuAD arguments of `albert finetune squad` / `albert evaluate squad`."""
        parser.add_argument(
            "--version", dest="squad_version", choices=("1.1", "2.0"), help="SQuAD version (default 1.1)"
        )
        parser.add_argument(
            "--train",
            "--train-file",
            dest="train_file",
            type=Path,
            required=mode == "finetune",
            help="training SQuAD JSON",
        )
        parser.add_argument(
            "--dev",
            "--dev-file",
            dest="dev_file",
            type=Path,
            help="dev SQuAD JSON (evaluated during training)",
        )
        parser.add_argument(
            "--test",
            "--test-file",
            dest="test_file",
            type=Path,
            help="test SQuAD JSON (predictions only if unlabelled)",
        )
        parser.add_argument(
            "--head", choices=HEADS, help="SQuAD 2.0 head: verifier (ALBERT's, default) or span (BERT-style)"
        )
        parser.add_argument("--doc-stride", type=int, help=f"window stride in tokens (default {DOC_STRIDE})")
        parser.add_argument(
            "--max-query-length", type=int, help=f"question tokens kept (default {MAX_QUERY_LENGTH})"
        )
        parser.add_argument("--n-best-size", type=int, help="n-best list size (default 20)")
        parser.add_argument("--max-answer-length", type=int, help="longest answer in tokens (default 30)")
        parser.add_argument(
            "--null-threshold",
            type=float,
            help="SQuAD 2.0: fixed no-answer threshold (default: best F1 on the split)",
        )
        parser.add_argument(
            "--answer-start-policy", choices=ANSWER_START_POLICIES, default="nearest",
            help="an answer_start that does not point at the answer text: nearest occurrence (default), "
            "original (trust it, as google-research/albert), skip",
        )  # fmt: skip

    @classmethod
    def cli_task(cls, args: Any, info: Mapping[str, Any] | None = None) -> tuple[SquadTask, dict[str, Any]]:
        """The task and its preset from parsed arguments (and the task.json of a fine-tuned model)."""
        info = dict(info or {})
        version = args.squad_version or str(info.get("version", "1.1"))
        if info and str(info.get("version", version)) != version:
            raise ValueError(f"the model was fine-tuned on SQuAD {info.get('version')}, not {version}")
        files = {
            k: v
            for k, v in (("train", args.train_file), ("dev", args.dev_file), ("test", args.test_file))
            if v
        }

        def pick(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return value if value is not None else info.get(name, default)

        task = SquadTask(
            version,
            files,
            head=pick("head", "verifier"),
            doc_stride=int(pick("doc_stride", DOC_STRIDE)),
            max_query_length=int(pick("max_query_length", MAX_QUERY_LENGTH)),
            n_best_size=int(pick("n_best_size", 20)),
            max_answer_length=int(pick("max_answer_length", 30)),
            null_threshold=args.null_threshold,  # evaluation: chosen on the split unless fixed here
            answer_start_policy=args.answer_start_policy,
        )
        # for unlabelled splits (and `albert predict`): the threshold chosen on dev when fine-tuning
        task.chosen_threshold = info.get("null_threshold")
        return task, PRESETS[version]

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        return PRESETS["1.1"], "SQuAD 1.1's; --version 2.0 has its own (--print-config shows them)"


def _as_squad_example(ex: Any) -> SquadExample:
    question, context = ex.texts[0], ex.texts[1]
    return SquadExample(str(ex.guid), question, context, [])
