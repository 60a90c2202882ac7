"""SQuAD reader and featurization: the real v1.1 dev set end to end, windows, labels and bad input."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from albert_lm.tasks import squad_data as S
from albert_lm.tasks.squad_metric import evaluate_v1, normalize_answer
from albert_lm.tasks.squad_postprocess import SpanResult, postprocess_span
from conftest import data_path


@pytest.fixture(scope="module")
def tokenizer():
    from albert_lm.tokenizer import load_tokenizer

    return load_tokenizer(data_path("minilm"))  # the real uncased WordPiece vocabulary of all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def dev():
    """The real span-extraction set in the SQuAD v1.1 layout that `make data` builds: the population
    spans of 497 PubMed abstracts (evals' population_span_extraction), each answer_start checked."""
    return S.read_squad(data_path("pubmed_spans", "pubmed-spans-v1.1.json"))


@pytest.fixture(scope="module")
def dev_features(dev, tokenizer):
    return S.featurize(dev.examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64)


# ------------------------------------------------------------------------------------------ real data
@pytest.mark.data
def test_reads_the_real_span_set(dev):
    assert dev.version == "1.1"
    assert len(dev.raw) == 497 and len(dev.examples) == 497  # an article and a question per abstract
    assert sum(len(e.answers) for e in dev.examples) == 693  # 355 abstracts have 1 span, 142 have 2-5
    assert not any(e.is_impossible for e in dev.examples)
    for e in dev.examples:
        for a in e.answers:
            assert e.context[a.start : a.start + len(a.text)] == a.text


@pytest.mark.data
def test_every_gold_answer_maps_to_tokens_that_map_back(dev, dev_features):
    """Each of the 693 gold answers maps to a token span whose paragraph text is the answer, with one
    counted, explained exception."""
    _, report = dev_features
    by_id = {e.qas_id: e for e in dev.examples}
    counts = Counter(a.status for a in report.alignments)
    assert len(report.alignments) == 693
    assert counts["unalignable"] == 0 and counts["mismatch"] == 0
    for a in report.alignments:
        answer = by_id[a.qas_id].answers[a.answer_index].text.strip()
        if a.status == "exact":
            assert a.text == answer, a
        else:  # "wider": the span starts or ends inside a WordPiece token
            assert a.status == "wider"
            assert answer in a.text and a.text != answer, a
            assert len(a.text) - len(answer) <= 20
    # every answer_start is exact (checked when the set is built): nothing to repair
    assert counts["repaired"] == 0
    # the exception: 3 spans start or end inside a WordPiece token
    assert counts["wider"] == 3
    assert counts["exact"] == 693 - 3


@pytest.mark.data
def test_gold_spans_round_trip_through_post_processing_to_em_100(dev, dev_features):
    """One-hot logits at each window's label, post-processed like model output, give back the first gold
    answer: EM 100 except where that answer is a part of a token."""
    features, report = dev_features
    # abstracts of up to 1,452 pieces: 1,038 windows for 497 questions, 471 of them without the answer
    assert report.features == len(features) == 1038 and report.negative_windows == 471
    results = []
    for f in features:
        start = np.full(len(f.input_ids), -10.0)
        end = np.full(len(f.input_ids), -10.0)
        start[f.start_position] = end[f.end_position] = 10.0
        results.append(SpanResult(f.unique_id, start, end))
    # max_answer_length beyond any gold: population spans run to dozens of tokens
    preds = postprocess_span(dev.examples, features, results, n_best_size=1, max_answer_length=512).best_text
    first_wider = {a.qas_id for a in report.alignments if a.answer_index == 0 and a.status == "wider"}
    golds = dev.golds()
    wrong = {
        q for q, p in preds.items() if not any(normalize_answer(p) == normalize_answer(g) for g in golds[q])
    }
    assert wrong <= first_wider
    assert len(first_wider) == 2 and len(wrong) == 2
    assert evaluate_v1(golds, preds)["exact_match"] == pytest.approx(100.0 * (1 - len(wrong) / len(golds)))


@pytest.mark.data
def test_windows_on_real_data(dev, dev_features, tokenizer):
    features, report = dev_features
    assert report.positive_windows + report.negative_windows == len(features)
    assert report.negative_windows > 0  # windows of long paragraphs without the answer
    for f in features[:2000]:
        assert len(f.input_ids) <= 384
        n_head = f.doc_offset
        assert f.input_ids[0] == tokenizer.cls_id and f.input_ids[n_head - 1] == tokenizer.sep_id
        assert f.input_ids[-1] == tokenizer.sep_id
        assert f.token_type_ids == [0] * n_head + [1] * (len(f.input_ids) - n_head)
        assert f.p_mask == [0] + [1] * (n_head - 1) + [0] * (len(f.input_ids) - n_head - 1) + [1]
        if f.is_impossible:
            assert f.start_position == f.end_position == 0
        else:
            assert n_head <= f.start_position <= f.end_position < len(f.input_ids) - 1


# ------------------------------------------------------------------------------------- small cases
class _CharTokenizer:
    """One token per non-space character; ids = code points + 10; special ids 1, 2, 0."""

    cls_id, sep_id, pad_id = 1, 2, 0

    def encode_with_offsets(self, text):
        pos = [i for i, c in enumerate(text) if not c.isspace()]
        return [ord(text[i]) + 10 for i in pos], [(i, i + 1) for i in pos]

    def encode_ids(self, text):
        return self.encode_with_offsets(text)[0]


def _example(context, question, answer=None, start=None, qid="q1"):
    answers = (
        [] if answer is None else [S.SquadAnswer(answer, context.index(answer) if start is None else start)]
    )
    return S.SquadExample(qid, question, context, answers, is_impossible=answer is None)


def test_sliding_windows_labels_and_max_context():
    ctx = "abcdefghijklmnopqrstuvwxyz"
    ex = _example(ctx, "q?", "klm")
    feats, rep = S.featurize([ex], _CharTokenizer(), max_seq_length=14, doc_stride=4, max_query_length=5)
    # window length 14 - 2 - 3 = 9, windows start every 4 tokens: 0, 4, 8, 12, 16 (16 + 9 = 25 < 26), 20
    assert [(f.doc_span_index, f.offsets[f.doc_offset][0]) for f in feats] == [
        (0, 0), (1, 4), (2, 8), (3, 12), (4, 16), (5, 20)
    ]  # fmt: skip
    labelled = [f for f in feats if not f.is_impossible]
    # "klm" = tokens 10..12: inside windows starting at 4 (4..12) and 8 (8..16) only
    assert [f.offsets[f.doc_offset][0] for f in labelled] == [4, 8]
    for f in labelled:
        text = "".join(chr(i - 10) for i in f.input_ids[f.start_position : f.end_position + 1])
        assert text == "klm"
    for f in feats:
        if f.is_impossible:
            assert (f.start_position, f.end_position) == (0, 0)
    assert rep.positive_windows == 2 and rep.negative_windows == 4
    # each paragraph token is "max context" in exactly one window
    per_char = Counter(f.offsets[i] for f in feats for i in range(len(f.offsets)) if f.max_context[i])
    assert set(per_char.values()) == {1} and len(per_char) == 26
    # the token "l" (11) is best in the window 8..16 (3 left, 5 right) over 4..12 (7 left, 1 right)
    best = [
        f.offsets[f.doc_offset][0]
        for f in feats
        for i, o in enumerate(f.offsets)
        if o == (11, 12) and f.max_context[i]
    ]
    assert best == [8]


def test_question_truncation_is_counted_and_bad_lengths_rejected():
    ex = _example("abc def", "a very long question", "def")
    feats, rep = S.featurize([ex], _CharTokenizer(), max_seq_length=20, max_query_length=4)
    assert rep.truncated_questions == ["q1"]
    assert feats[0].input_ids[1:5] == _CharTokenizer().encode_ids("a ver")[:4]
    with pytest.raises(ValueError, match="max_query_length"):
        S.featurize([ex], _CharTokenizer(), max_seq_length=10, max_query_length=7)


def test_answer_start_policies():
    ctx = "Team A beat Team B. Jim Gray scored."
    bad = S.SquadExample("q", "who?", ctx, [S.SquadAnswer("Jim Gray", ctx.index("Jim Gray") - 2)])
    tok = _CharTokenizer()
    _, rep = S.featurize([bad], tok, max_seq_length=64, max_query_length=8)
    assert [a.status for a in rep.alignments] == ["repaired"] and rep.alignments[0].text == "Jim Gray"
    feats, rep = S.featurize(
        [bad], tok, max_seq_length=64, max_query_length=8, answer_start_policy="skip", is_training=True
    )
    assert (
        [a.status for a in rep.alignments] == ["mismatch"] and rep.dropped_examples == ["q"] and feats == []
    )
    _, rep = S.featurize([bad], tok, max_seq_length=64, max_query_length=8, answer_start_policy="original")
    # the original trusts answer_start and the length: the span is ". Jim Gr"
    assert rep.alignments[0].status == "mismatch" and rep.alignments[0].text == ". Jim Gr"
    far = S.SquadExample("q", "who?", ctx, [S.SquadAnswer("Jim Gray", 0)])
    _, rep = S.featurize(
        [far], tok, max_seq_length=64, max_query_length=8
    )  # 20 characters away: not repaired
    assert rep.alignments[0].status == "mismatch"
    with pytest.raises(ValueError, match="answer_start_policy"):
        S.featurize([far], tok, answer_start_policy="guess")


def test_unalignable_answer_is_counted_and_dropped_in_training():
    ex = S.SquadExample("q", "?", "a   b", [S.SquadAnswer("  ", 1)])
    feats, rep = S.featurize([ex], _CharTokenizer(), max_seq_length=32, max_query_length=8, is_training=True)
    assert rep.count("unalignable") == 1 and rep.dropped_examples == ["q"] and feats == []
    feats, rep = S.featurize([ex], _CharTokenizer(), max_seq_length=32, max_query_length=8, is_training=False)
    assert len(feats) == 1 and feats[0].is_impossible  # evaluation keeps it, without a label


def test_char_span_to_tokens():
    offs = [(0, 3), (4, 9), (9, 10), (11, 15)]
    assert S.char_span_to_tokens(offs, 4, 10) == (1, 2)
    assert S.char_span_to_tokens(offs, 5, 6) == (1, 1)  # inside one token
    assert S.char_span_to_tokens(offs, 3, 4) is None  # only a space
    assert S.char_span_to_tokens(offs, 0, 15) == (0, 3)


def test_collate_pads_dynamically():
    tok = _CharTokenizer()
    feats, _ = S.featurize(
        [_example("abcdef", "q", "cd"), _example("ab", "q", "b", qid="q2")],
        tok,
        max_seq_length=32,
        max_query_length=8,
    )
    batch = S.collate(feats, pad_id=0)
    assert batch["input_ids"].shape == (2, 3 + 6 + 1)
    assert batch["attention_mask"][1].tolist() == [1] * 6 + [0] * 4
    assert batch["p_mask"][1].tolist() == [0, 1, 1, 0, 0, 1, 1, 1, 1, 1]  # padding is masked
    assert batch["start_positions"].tolist() == [5, 4] and batch["is_impossible"].tolist() == [0.0, 0.0]


def test_each_head_gets_only_the_inputs_its_forward_names():
    """The span head has no p_mask / is_impossible: given them, a model that refuses unknown inputs
    (issue 15 item 12) fails, and one that swallows them hides a mistake."""
    import inspect

    from albert_lm.model import AlbertForQuestionAnswering
    from albert_lm.model.squad_head import AlbertForSquadV2
    from albert_lm.tasks.squad import SquadTask

    feats, _ = S.featurize(
        [_example("abcdef", "q", "cd")], _CharTokenizer(), max_seq_length=32, max_query_length=8
    )
    for head, cls in (("span", AlbertForQuestionAnswering), ("verifier", AlbertForSquadV2)):
        batch = SquadTask("2.0", head=head).collate([{"squad": f} for f in feats])
        params = inspect.signature(cls.forward).parameters.values()
        named = {p.name for p in params if p.kind is not p.VAR_KEYWORD}
        assert set(batch) <= named, (head, set(batch) - named)
        assert ("p_mask" in batch) == (head == "verifier")


# ------------------------------------------------------------------------------------------ bad input
def test_malformed_json_names_file_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"version": "1.1",\n "data": [\n  {"title": "x", "paragraphs": [}\n]}')
    with pytest.raises(S.SquadFormatError, match=r"bad\.json:3:\d+: malformed JSON"):
        S.read_squad(p)


def test_missing_and_mistyped_fields_name_the_json_path(tmp_path):
    def write(obj):
        p = tmp_path / "f.json"
        p.write_text(json.dumps(obj))
        return p

    qa = {"id": "q7", "question": "?", "answers": [{"text": "x"}]}
    doc = {"data": [{"title": "t", "paragraphs": [{"context": "x y", "qas": [qa]}]}]}
    with pytest.raises(
        S.SquadFormatError, match=r"qas\[0\] \(id q7\)\.answers\[0\]: missing field 'answer_start'"
    ):
        S.read_squad(write(doc))
    qa["answers"] = [{"text": "x", "answer_start": "0"}]
    with pytest.raises(S.SquadFormatError, match=r"answer_start: expected int, got str"):
        S.read_squad(write(doc))
    qa["answers"] = [{"text": "x", "answer_start": 99}]
    with pytest.raises(S.SquadFormatError, match=r"99 is outside the context"):
        S.read_squad(write(doc))
    with pytest.raises(S.SquadFormatError, match="no top-level 'data'"):
        S.read_squad(write({"version": "1.1"}))


def test_version_two_reading_and_the_unanswerable_builder():
    data = [
        {
            "title": f"t{i}",
            "paragraphs": [
                {
                    "context": f"c{i} x",
                    "qas": [
                        {
                            "id": f"{i}-{j}",
                            "question": "?",
                            "answers": [{"text": "x", "answer_start": len(f"c{i} ")}],
                        }
                        for j in range(20)
                    ],
                }
            ],
        }  # fmt: skip
        for i in range(3)
    ]
    v2 = S.make_unanswerable(data, fraction=0.5, seed=0)
    parsed = S.parse_squad({"version": "v2.0", "data": v2})
    assert parsed.version == "2.0" and len(parsed.examples) == 60
    impossible = [e for e in parsed.examples if e.is_impossible]
    assert 15 <= len(impossible) <= 45 and all(not e.answers for e in impossible)
    for e in impossible:  # moved to another article's paragraph
        assert e.context.split()[0] != "c" + e.qas_id.split("-")[0]
    for e in parsed.examples:
        if not e.is_impossible:
            assert e.context[e.answers[0].start :].startswith("x")
    assert S.make_unanswerable(data, 0.5, seed=0) == v2  # deterministic
    train, rest = S.split_articles(data, 2 / 3)
    assert [a["title"] for a in train] == ["t0", "t1"] and [a["title"] for a in rest] == ["t2"]


def test_compute_metrics_is_pure_and_apply_metrics_settles_the_answers():
    import copy

    from albert_lm.tasks.base import Example
    from albert_lm.tasks.squad import SquadTask

    task = SquadTask("2.0")
    golds = {"a": ["x"], "b": [], "c": ["w"], "d": []}
    best = {"a": "x", "b": "y", "c": "wrong", "d": "z"}
    odds = {"a": -2.0, "b": 3.0, "c": 0.5, "d": 1.0}
    records = [
        {"guid": q, "prediction": best[q], "best_span": best[q], "null_odds": odds[q], "nbest": []}
        for q in best
    ]
    examples = [Example(q, ("?", "ctx"), golds[q]) for q in golds]
    before = copy.deepcopy(records)
    metrics = task.compute_metrics(records, examples)
    assert records == before and task.chosen_threshold is None  # neither the records nor the task changed
    assert metrics["threshold_chosen"] == 1.0 and metrics["f1"] == pytest.approx(metrics["best_f1"]) == 75.0
    settled = task.apply_metrics(records, metrics)
    assert [r["prediction"] for r in settled] == ["x", "", "", ""] and records == before
    task.calibrate(metrics)
    assert task.chosen_threshold == metrics["null_threshold"]
    fixed = SquadTask("2.0", null_threshold=10.0)
    assert fixed.compute_metrics(records, examples)["threshold_chosen"] == 0.0
    fixed.calibrate(metrics)
    assert fixed.chosen_threshold is None  # a fixed threshold stays the one used
