"""SQuAD 1.1 / 2.0 data: reading the official JSON, windowing paragraphs into features, labelling spans,
collating batches, and building SQuAD-2.0-style sets from SQuAD 1.1.

Read -> featurize (this module) -> (train | predict) -> post-process (`squad_postprocess`) -> score
(`squad_metric`); `albert_lm.tasks.squad` puts them together as a task.

Featurization follows google-research/albert ``squad_utils.convert_examples_to_features`` in what it
produces, with one change of method: the original re-aligns the SentencePiece pieces to the paragraph
with a longest-common-subsequence search over characters; here the tokenizer reports each token's
character span in the original text (``encode_with_offsets``), so an answer's character span maps to
tokens exactly, and a predicted token span maps back to exactly the text it covers.

* the question is tokenized and cut to ``max_query_length`` tokens (the original cuts silently; the
  number of cut questions is counted here);
* the paragraph tokens are split into windows of at most ``max_seq_length - len(question) - 3`` tokens
  taken every ``doc_stride`` tokens; each window gives a feature ``[CLS] question [SEP] window [SEP]``
  with token types 0 for ``[CLS] question [SEP]`` and 1 for ``window [SEP]``;
* ``p_mask`` is 1 where an answer cannot be: the question, both ``[SEP]`` and padding; 0 at ``[CLS]``
  (the no-answer position) and the paragraph tokens (original ``p_mask``);
* a window that does not contain the whole answer is labelled as the original labels it: start = end =
  0 (``[CLS]``) and ``is_impossible = 1``, for SQuAD 1.1 as for 2.0; unanswerable questions likewise;
* ``token_is_max_context``: a token that appears in several windows is scored only in the window where
  it has the most context on both sides (original ``_check_is_max_context``).

Differences from the original, each counted in `FeaturizeReport` rather than silent:

* an ``answer_start`` that does not point at the answer text (15 of the 34,680 answers of the v1.1 dev
  set are off by one) is, by default, moved to the nearest occurrence of the text within
  ``max_start_shift`` characters (``answer_start_policy="nearest"``); ``"original"`` trusts
  ``answer_start`` and the text length as the original does; ``"skip"`` drops that answer;
* the original raises when a training question does not have exactly one answer; here the first answer
  that aligns is used (so the dev set, with up to 5 answers per question, can be trained on);
* a training example none of whose answers can be aligned is dropped and listed in the report.
"""

from __future__ import annotations

import bisect
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from albert_lm.tasks.inputs import build_inputs

logger = logging.getLogger(__name__)

# Defaults of google-research/albert run_squad_v1.py / run_squad_v2.py flags.
MAX_SEQ_LENGTH = 384  # max_seq_length (the README uses 384 for v1.1 and 512 for v2.0, see squad.PRESETS)
DOC_STRIDE = 128  # doc_stride
MAX_QUERY_LENGTH = 64  # max_query_length
ANSWER_START_POLICIES = ("nearest", "original", "skip")


class SquadFormatError(ValueError):
    """A SQuAD file that cannot be read; the message names the file and the field or line."""


class TokenizerLike(Protocol):
    """What featurization needs from a tokenizer (`albert_lm.tokenizer` implements it)."""

    cls_id: int
    sep_id: int
    pad_id: int

    def encode_ids(self, text: str) -> list[int]: ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...


# --------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class SquadAnswer:
    text: str
    start: int
    """``answer_start``: character offset of the answer in the paragraph."""


@dataclass
class SquadExample:
    """One question about one paragraph."""

    qas_id: str
    question: str
    context: str
    answers: list[SquadAnswer]
    """Gold answers (SQuAD 2.0: empty when ``is_impossible``)."""
    is_impossible: bool = False
    title: str = ""

    @property
    def answer_texts(self) -> list[str]:
        return [a.text for a in self.answers]


@dataclass
class SquadData:
    """A read SQuAD file: its examples, its version ("1.1" or "2.0") and the raw ``data`` list."""

    examples: list[SquadExample]
    version: str
    path: Path | None = None
    raw: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def golds(self) -> dict[str, list[str]]:
        """``qid -> gold answer texts`` for `albert_lm.tasks.squad_metric`."""
        return {e.qas_id: e.answer_texts for e in self.examples}


def _field(obj: Any, key: str, where: str, path: Path | str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise SquadFormatError(f"{path}: {where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SquadFormatError(f"{path}: {where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def parse_squad(obj: Any, path: Path | str | None = None) -> SquadData:
    """Examples from an already loaded SQuAD JSON object (``{"version": ..., "data": [...]}``)."""
    source = Path(path) if path is not None else None
    path = path if path is not None else "<squad>"
    if not isinstance(obj, dict) or "data" not in obj:
        raise SquadFormatError(f"{path}: not a SQuAD file: no top-level 'data' list")
    data = _field(obj, "data", "top level", path, list)
    examples: list[SquadExample] = []
    has_impossible = False
    seen: set[str] = set()
    for ai, article in enumerate(data):
        where_a = f"data[{ai}]"
        title = article.get("title", "") if isinstance(article, dict) else ""
        for pi, paragraph in enumerate(_field(article, "paragraphs", where_a, path, list)):
            where_p = f"{where_a}.paragraphs[{pi}]"
            context = _field(paragraph, "context", where_p, path, str)
            for qi, qa in enumerate(_field(paragraph, "qas", where_p, path, list)):
                where_q = f"{where_p}.qas[{qi}]"
                qid = _field(qa, "id", where_q, path, (str, int))
                qid = str(qid)
                where_q += f" (id {qid})"
                if qid in seen:
                    raise SquadFormatError(f"{path}: {where_q}: duplicate question id")
                seen.add(qid)
                question = _field(qa, "question", where_q, path, str)
                impossible = bool(qa.get("is_impossible", False))
                has_impossible |= "is_impossible" in qa
                answers = []
                for ni, ans in enumerate(qa.get("answers", [])):
                    where_n = f"{where_q}.answers[{ni}]"
                    text = _field(ans, "text", where_n, path, str)
                    start = _field(ans, "answer_start", where_n, path, int)
                    if not 0 <= start <= len(context):
                        raise SquadFormatError(
                            f"{path}: {where_n}.answer_start: {start} is outside the context "
                            f"(length {len(context)})"
                        )
                    answers.append(SquadAnswer(text, start))
                if impossible and answers:
                    raise SquadFormatError(f"{path}: {where_q}: is_impossible but has answers")
                examples.append(SquadExample(qid, question, context, answers, impossible, title))
    version = str(obj.get("version", "")).lstrip("v")
    if version not in ("1.1", "2.0"):
        version = "2.0" if has_impossible else "1.1"
    return SquadData(examples, version, source, data)


def read_squad(path: str | Path) -> SquadData:
    """Read a SQuAD 1.1 or 2.0 JSON file.

    Raises:
        FileNotFoundError: no such file.
        SquadFormatError: malformed JSON (with line and column) or a missing / mistyped field (with its
            JSON path, e.g. ``data[3].paragraphs[0].qas[7] (id ...).answers[0].answer_start``).
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise SquadFormatError(f"{path}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise SquadFormatError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_squad(obj, path)


# ------------------------------------------------------------------------------------- featurization
@dataclass
class SquadFeature:
    """One window of one example, unpadded (batches are padded by `collate`)."""

    unique_id: int
    example_index: int
    doc_span_index: int
    input_ids: list[int]
    token_type_ids: list[int]
    p_mask: list[int]
    """1 where the answer cannot start or end: question, [SEP], (padding); 0 at [CLS] and paragraph."""
    offsets: list[tuple[int, int] | None]
    """Character span in the paragraph of each paragraph token; None for [CLS], question, [SEP]."""
    max_context: list[bool]
    """Whether this window is the one with the most context for the token at each position."""
    start_position: int = 0
    end_position: int = 0
    is_impossible: bool = False

    @property
    def doc_offset(self) -> int:
        """Position of the first paragraph token."""
        return next(i for i, o in enumerate(self.offsets) if o is not None)


@dataclass
class AnswerAlignment:
    """Where one gold answer landed in the paragraph's tokens."""

    qas_id: str
    answer_index: int
    status: str
    """"exact": the tokens cover exactly the answer text; "wider": the answer starts or ends inside a
    token, so the tokens cover more; "repaired": answer_start did not point at the text and was moved;
    "mismatch": answer_start does not point at the text (and was not repaired); "unalignable": no token
    overlaps the answer (e.g. an all-whitespace answer)."""
    token_start: int = -1
    token_end: int = -1
    text: str = ""
    """The paragraph text the tokens cover."""


@dataclass
class FeaturizeReport:
    """What featurization did, with every exception counted (also logged by `log`)."""

    examples: int = 0
    features: int = 0
    positive_windows: int = 0
    negative_windows: int = 0
    truncated_questions: list[str] = field(default_factory=list)
    alignments: list[AnswerAlignment] = field(default_factory=list)
    dropped_examples: list[str] = field(default_factory=list)
    """Training examples without any alignable answer (not featurized)."""

    def count(self, status: str) -> int:
        return sum(1 for a in self.alignments if a.status == status)

    def summary(self) -> dict[str, int]:
        return {
            "examples": self.examples,
            "features": self.features,
            "positive_windows": self.positive_windows,
            "negative_windows": self.negative_windows,
            "truncated_questions": len(self.truncated_questions),
            "answers": len(self.alignments),
            **{
                f"answers_{s}": self.count(s)
                for s in ("exact", "wider", "repaired", "mismatch", "unalignable")
            },
            "dropped_examples": len(self.dropped_examples),
        }

    def log(self) -> None:
        s = self.summary()
        logger.info(
            "SQuAD featurization: %d examples -> %d features (%d with the answer, %d without)",
            s["examples"],
            s["features"],
            s["positive_windows"],
            s["negative_windows"],
        )
        if s["truncated_questions"]:
            logger.warning("%d questions cut to max_query_length tokens", s["truncated_questions"])
        for status in ("repaired", "mismatch", "unalignable", "wider"):
            if s[f"answers_{status}"]:
                ids = [a.qas_id for a in self.alignments if a.status == status][:5]
                logger.warning("%d answers %s (e.g. %s)", s[f"answers_{status}"], status, ", ".join(ids))
        if self.dropped_examples:
            logger.warning(
                "%d training examples dropped: no answer could be aligned (e.g. %s)",
                len(self.dropped_examples),
                ", ".join(self.dropped_examples[:5]),
            )


def _strip_span(context: str, start: int, end: int) -> tuple[int, int]:
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return start, end


def locate_answer(
    context: str, answer: SquadAnswer, policy: str = "nearest", max_start_shift: int = 16
) -> tuple[int, int, str]:
    """Character span ``[start, end)`` of ``answer`` in ``context`` and how it was found.

    Returns:
        ``(start, end, status)`` with status "ok", "repaired" (moved to the nearest occurrence of the
        text within ``max_start_shift`` characters) or "mismatch" (``answer_start`` does not point at
        the text: with policy "original" the span is still ``answer_start + len(text)``, with "skip" and
        an unrepaired "nearest" it is ``(-1, -1)``).
    """
    if policy not in ANSWER_START_POLICIES:
        raise ValueError(f"answer_start_policy must be one of {ANSWER_START_POLICIES}, got {policy!r}")
    text, start = answer.text, answer.start
    if context[start : start + len(text)] == text:
        return start, start + len(text), "ok"
    if policy == "original":
        # google-research/albert squad_utils.py: end = start + len(text) - 1, whatever is there
        return start, min(start + len(text), len(context)), "mismatch"
    if policy == "nearest" and text:
        best = -1
        lo = max(0, start - max_start_shift)
        pos = context.find(text, lo, start + max_start_shift + len(text))
        while pos != -1:
            if best < 0 or abs(pos - start) < abs(best - start):
                best = pos
            pos = context.find(text, pos + 1, start + max_start_shift + len(text))
        if best >= 0:
            return best, best + len(text), "repaired"
    return -1, -1, "mismatch"


def char_span_to_tokens(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """First and last token overlapping the characters ``[start, end)`` (offsets sorted, non-overlapping),
    or None when no token does."""
    if end <= start:
        return None
    ends = [e for _, e in offsets]
    first = bisect.bisect_right(ends, start)  # first token ending after `start`
    starts = [s for s, _ in offsets]
    last = bisect.bisect_left(starts, end) - 1  # last token starting before `end`
    if first >= len(offsets) or last < 0 or first > last:
        return None
    return first, last


def _check_is_max_context(spans: Sequence[tuple[int, int]], cur: int, position: int) -> bool:
    """Original ``_check_is_max_context``: score = min(left, right context) + 0.01 * window length."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return cur == best_index


def doc_windows(num_tokens: int, max_tokens: int, doc_stride: int) -> list[tuple[int, int]]:
    """``(start, length)`` windows over ``num_tokens`` paragraph tokens (original sliding window)."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    if not spans:  # an empty paragraph still gives one (empty) window
        spans.append((0, 0))
    return spans


def featurize(
    examples: Sequence[SquadExample],
    tokenizer: TokenizerLike,
    *,
    max_seq_length: int = MAX_SEQ_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    is_training: bool = False,
    answer_start_policy: str = "nearest",
    first_unique_id: int = 1_000_000_000,
) -> tuple[list[SquadFeature], FeaturizeReport]:
    """Windows of ``[CLS] question [SEP] paragraph-window [SEP]`` for every example.

    Args:
        examples: from `read_squad`.
        tokenizer: anything with ``cls_id``, ``sep_id``, ``pad_id``, ``encode_ids`` and
            ``encode_with_offsets`` (offsets into the original text).
        max_seq_length, doc_stride, max_query_length: as the original flags.
        is_training: drop (and report) examples none of whose answers can be aligned; otherwise every
            example gets its features, labelled from its first alignable answer when there is one.
        answer_start_policy: "nearest" | "original" | "skip", see `locate_answer`.
        first_unique_id: the original numbers features from 1000000000.

    Returns:
        The features and a `FeaturizeReport`. Every gold answer of every example is aligned and recorded
        in the report (not only the one used as the label).
    """
    if max_seq_length <= max_query_length + 3:
        # original run_squad_v2.py validate_flags_or_throw
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must be greater than max_query_length ({max_query_length}) + 3"
        )
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}")
    report = FeaturizeReport(examples=len(examples))
    features: list[SquadFeature] = []
    cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}  # questions often share a paragraph
    for ex_index, ex in enumerate(examples):
        query = tokenizer.encode_ids(ex.question)
        if len(query) > max_query_length:
            report.truncated_questions.append(ex.qas_id)
            query = query[:max_query_length]
        if ex.context not in cache:
            ids, offs = tokenizer.encode_with_offsets(ex.context)
            cache[ex.context] = (list(ids), [tuple(o) for o in offs])  # type: ignore[misc]
        doc_ids, doc_offsets = cache[ex.context]
        label = _align_answers(ex, doc_offsets, answer_start_policy, report)
        if is_training and not ex.is_impossible and label is None:
            report.dropped_examples.append(ex.qas_id)
            continue
        windows = _example_windows(
            ex, ex_index, tokenizer, query, doc_ids, doc_offsets, label,
            max_seq_length=max_seq_length, doc_stride=doc_stride,
            first_unique_id=first_unique_id + len(features),
        )  # fmt: skip
        for feature in windows:
            if feature.is_impossible:
                report.negative_windows += 1
            else:
                report.positive_windows += 1
        features.extend(windows)
    report.features = len(features)
    return features, report


def _align_answers(
    ex: SquadExample, doc_offsets: Sequence[tuple[int, int]], policy: str, report: FeaturizeReport
) -> tuple[int, int] | None:
    """Align every gold answer of ``ex`` to paragraph tokens (each recorded in ``report``); the first
    that aligns is the label, as a (first, last) token span."""
    label: tuple[int, int] | None = None
    for ai, ans in enumerate(ex.answers):
        s, e, how = locate_answer(ex.context, ans, policy)
        if how == "mismatch" and policy != "original":
            report.alignments.append(AnswerAlignment(ex.qas_id, ai, "mismatch"))
            continue
        s, e = _strip_span(ex.context, s, e)
        span = char_span_to_tokens(doc_offsets, s, e)
        if span is None:
            report.alignments.append(AnswerAlignment(ex.qas_id, ai, "unalignable"))
            continue
        covered = ex.context[doc_offsets[span[0]][0] : doc_offsets[span[1]][1]]
        if how == "ok":
            status = "exact" if covered == ex.context[s:e] else "wider"
        else:
            status = how  # "repaired" or (policy "original") "mismatch"
        report.alignments.append(AnswerAlignment(ex.qas_id, ai, status, span[0], span[1], covered))
        if label is None:
            label = span
    return label


def _example_windows(
    ex: SquadExample,
    ex_index: int,
    tokenizer: TokenizerLike,
    query: Sequence[int],
    doc_ids: Sequence[int],
    doc_offsets: Sequence[tuple[int, int]],
    label: tuple[int, int] | None,
    *,
    max_seq_length: int,
    doc_stride: int,
    first_unique_id: int,
) -> list[SquadFeature]:
    """The features of one example: one per paragraph window, labelled with the answer's token span
    when the window holds all of it, else as no-answer at [CLS] (the original's labelling)."""
    max_doc = max_seq_length - len(query) - 3  # [CLS], [SEP], [SEP]
    spans = doc_windows(len(doc_ids), max_doc, doc_stride)
    features = []
    for span_index, (start, length) in enumerate(spans):
        window = range(start, start + length)
        input_ids, token_type_ids = build_inputs(tokenizer, list(query), [doc_ids[i] for i in window])
        n_head = len(query) + 2  # [CLS] query [SEP]
        impossible = ex.is_impossible or label is None
        start_pos = end_pos = 0
        if not impossible and label is not None:
            if label[0] >= start and label[1] <= start + length - 1:
                start_pos = label[0] - start + n_head
                end_pos = label[1] - start + n_head
            else:  # original: a window without the whole answer is labelled as no-answer at [CLS]
                impossible = True
        features.append(
            SquadFeature(
                unique_id=first_unique_id + span_index,
                example_index=ex_index,
                doc_span_index=span_index,
                input_ids=input_ids,
                token_type_ids=token_type_ids,
                p_mask=[0] + [1] * (n_head - 1) + [0] * length + [1],
                offsets=[None] * n_head + [doc_offsets[i] for i in window] + [None],
                max_context=[False] * n_head
                + [_check_is_max_context(spans, span_index, i) for i in window]
                + [False],
                start_position=start_pos,
                end_position=end_pos,
                is_impossible=impossible,
            )
        )
    return features


def collate(
    features: Sequence[SquadFeature], pad_id: int = 0, *, with_labels: bool = True, pad_to: int | None = None
) -> dict[str, Any]:
    """Pad a list of features to their longest (or to ``pad_to``) into a batch of tensors (what the
    models take).

    Keys: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``p_mask`` (padding is 1: no answer
    there), and with labels ``start_positions``, ``end_positions``, ``is_impossible`` (float 0/1).
    """
    import torch

    if not features:
        raise ValueError("collate: empty list of features")
    t = max(len(f.input_ids) for f in features)
    if pad_to is not None:
        t = max(t, pad_to)
    n = len(features)
    input_ids = torch.full((n, t), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((n, t), dtype=torch.long)
    attention_mask = torch.zeros((n, t), dtype=torch.long)
    p_mask = torch.ones((n, t), dtype=torch.long)
    for i, f in enumerate(features):
        k = len(f.input_ids)
        input_ids[i, :k] = torch.tensor(f.input_ids)
        token_type_ids[i, :k] = torch.tensor(f.token_type_ids)
        attention_mask[i, :k] = 1
        p_mask[i, :k] = torch.tensor(f.p_mask)
    batch: dict[str, Any] = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "p_mask": p_mask,
    }
    if with_labels:
        batch["start_positions"] = torch.tensor([f.start_position for f in features], dtype=torch.long)
        batch["end_positions"] = torch.tensor([f.end_position for f in features], dtype=torch.long)
        batch["is_impossible"] = torch.tensor([float(f.is_impossible) for f in features])
    return batch


# ------------------------------------------------------------------------------- SQuAD-2.0-style sets
def make_unanswerable(
    data: list[dict[str, Any]], fraction: float = 0.5, seed: int = 0
) -> list[dict[str, Any]]:
    """A SQuAD-2.0-style ``data`` list from a SQuAD 1.1 one: a ``fraction`` of the questions is moved to a
    paragraph of another article (so it cannot be answered there) and marked ``is_impossible`` with no
    answers; the others keep their paragraph and answers and get ``is_impossible: false``.

    The result is in the official v2.0 layout, readable by `parse_squad` and by the official script.
    Deterministic for a given ``seed``; needs at least two articles.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    if len(data) < 2:
        raise ValueError("make_unanswerable needs at least two articles")
    rng = random.Random(seed)
    out = [
        {
            "title": a.get("title", ""),
            "paragraphs": [{"context": p["context"], "qas": []} for p in a["paragraphs"]],
        }
        for a in data
    ]
    for ai, article in enumerate(data):
        for pi, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                if rng.random() < fraction:
                    other = rng.choice([j for j in range(len(data)) if j != ai])
                    opi = rng.randrange(len(data[other]["paragraphs"]))
                    moved = {"id": qa["id"], "question": qa["question"], "answers": [], "is_impossible": True}
                    out[other]["paragraphs"][opi]["qas"].append(moved)
                else:
                    kept = {**qa, "is_impossible": False}
                    out[ai]["paragraphs"][pi]["qas"].append(kept)
    return out


def split_articles(
    data: list[dict[str, Any]], train_fraction: float, seed: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a ``data`` list by article (no paragraph is in both parts): the first ``train_fraction`` of
    the articles, in file order or shuffled with ``seed``."""
    order = list(range(len(data)))
    if seed is not None:
        random.Random(seed).shuffle(order)
    k = round(len(data) * train_fraction)
    return [data[i] for i in order[:k]], [data[i] for i in order[k:]]
