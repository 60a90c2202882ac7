"""SQuAD post-processing: span filters, n-best, null odds, thresholds, output files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from albert_lm.tasks.squad_data import SquadAnswer, SquadExample, featurize
from albert_lm.tasks.squad_metric import evaluate_v2
from albert_lm.tasks.squad_postprocess import (
    Predictions,
    SpanResult,
    V2Result,
    choose_threshold,
    postprocess_span,
    postprocess_v2,
    write_official_files,
)


class _WordTokenizer:
    """One token per whitespace word (ids are irrelevant here)."""

    cls_id, sep_id, pad_id = 1, 2, 0

    def encode_with_offsets(self, text):
        offs, i = [], 0
        for w in text.split():
            i = text.index(w, i)
            offs.append((i, i + len(w)))
            i += len(w)
        return [10] * len(offs), offs

    def encode_ids(self, text):
        return self.encode_with_offsets(text)[0]


CTX = "Super Bowl 50 was played at Levi's Stadium in Santa Clara , California ."


def _setup(max_seq_length=64, doc_stride=128, context=CTX, qid="q"):
    ex = SquadExample(qid, "where ?", context, [SquadAnswer("Santa Clara", context.index("Santa"))])
    feats, _ = featurize(
        [ex], _WordTokenizer(), max_seq_length=max_seq_length, doc_stride=doc_stride, max_query_length=8
    )
    return ex, feats


def _pos(feature, word_index):
    return feature.doc_offset + word_index


def test_best_span_text_and_filters():
    ex, (f,) = _setup()
    n = len(f.input_ids)
    start, end = np.zeros(n), np.zeros(n)
    start[_pos(f, 9)], end[_pos(f, 10)] = 5.0, 5.0  # "Santa Clara"
    start[1], end[1] = 9.0, 9.0  # a question position: never an answer
    start[_pos(f, 11)], end[_pos(f, 3)] = 8.0, 8.0  # their pair ends before it starts: rejected
    start[0], end[0] = 7.0, 7.0  # [CLS]: not a span
    preds = postprocess_span([ex], [f], [SpanResult(f.unique_id, start, end)], n_best_size=5)
    assert preds.best_text == {"q": "Santa Clara"}
    nbest = preds.nbest["q"]
    assert nbest[0]["text"] == "Santa Clara" and nbest[0]["char_start"] == CTX.index("Santa")
    assert abs(sum(c["probability"] for c in nbest) - 1.0) < 1e-9
    assert len({c["text"] for c in nbest}) == len(nbest)  # texts are unique
    assert not preds.null_odds
    # max_answer_length 1 rules "Santa Clara" (2 tokens) out
    short = postprocess_span(
        [ex], [f], [SpanResult(f.unique_id, start, end)], n_best_size=5, max_answer_length=1
    )
    assert short.best_text["q"] != "Santa Clara" and len(short.best_text["q"].split()) == 1


def test_only_the_max_context_window_scores_a_start():
    ex, feats = _setup(max_seq_length=3 + 3 + 8, doc_stride=4)  # windows of 8 words every 4
    assert len(feats) >= 2
    results = []
    for f in feats:
        n = len(f.input_ids)
        start, end = np.zeros(n), np.zeros(n)
        for i, o in enumerate(f.offsets):
            if o is not None and CTX[o[0] : o[1]] == "Santa":
                start[i] = 10.0 if not f.max_context[i] else 1.0  # high score in the wrong window
            if o is not None and CTX[o[0] : o[1]] == "Clara":
                end[i] = 1.0
        results.append(SpanResult(f.unique_id, start, end))
    nbest = postprocess_span([ex], feats, results, n_best_size=20).nbest["q"]
    santa = [c for c in nbest if c["text"] == "Santa Clara"]
    assert len(santa) == 1 and santa[0]["start_score"] == 1.0  # the max-context window's score


def test_bert_style_null_odds_and_threshold():
    ex, (f,) = _setup()
    n = len(f.input_ids)
    start, end = np.zeros(n), np.zeros(n)
    start[_pos(f, 9)], end[_pos(f, 10)] = 4.0, 3.0
    start[0], end[0] = 2.0, 1.5  # null score 3.5
    preds = postprocess_span([ex], [f], [SpanResult(f.unique_id, start, end)], null_score=True)
    assert preds.null_odds["q"] == pytest.approx(3.5 - 7.0)
    assert "" in [c["text"] for c in preds.nbest["q"]]
    assert preds.answers(threshold=0.0) == {"q": "Santa Clara"}
    assert preds.answers(threshold=-4.0) == {"q": ""}


def _v2_result(f, starts, ends, cls):
    k = len(starts)
    return V2Result(
        f.unique_id,
        np.array([s[1] for s in starts]),
        np.array([s[0] for s in starts]),
        np.array([e[1] for row in ends for e in row]),
        np.array([e[0] for row in ends for e in row]),
        cls,
    ) if k else None  # fmt: skip


def test_v2_head_results_and_min_cls_over_windows():
    ex, feats = _setup(max_seq_length=3 + 3 + 8, doc_stride=4)
    results = []
    for w, f in enumerate(feats):
        s = next(
            (i for i, o in enumerate(f.offsets) if o and CTX[o[0] : o[1]] == "Santa" and f.max_context[i]),
            None,
        )
        e = next((i for i, o in enumerate(f.offsets) if o and CTX[o[0] : o[1]] == "Clara"), None)
        if s is not None and e is not None:
            starts = [(s, -0.1), (0, -3.0)]
            ends = [[(e, -0.2), (s, -1.0)], [(0, -1.0), (1, -2.0)]]  # [CLS] / question ends are rejected
        else:
            starts = [(0, -0.1), (f.doc_offset, -1.0)]
            ends = [[(0, -0.1), (0, -0.2)], [(f.doc_offset, -0.5), (f.doc_offset + 1, -4.0)]]
        results.append(_v2_result(f, starts, ends, cls=1.0 + w))
    preds = postprocess_v2([ex], feats, results)
    assert preds.best_text["q"] == "Santa Clara"
    assert preds.null_odds["q"] == 1.0  # the minimum over the windows (original accumulate_predictions_v2)
    assert preds.nbest["q"][0]["start_score"] == pytest.approx(-0.1)
    assert preds.answers(threshold=0.5) == {"q": ""} and preds.answers(threshold=1.0) == {"q": "Santa Clara"}


def test_choose_threshold_reaches_best_f1_and_files(tmp_path):
    best = {"a": "x", "b": "y", "c": "wrong", "d": "z"}
    golds = {"a": ["x"], "b": [], "c": ["w"], "d": []}
    null_odds = {"a": -2.0, "b": 3.0, "c": 0.5, "d": 1.0}
    preds = Predictions(best, {q: [{"text": t}] for q, t in best.items()}, null_odds)
    thr = choose_threshold(preds, golds)
    ref = evaluate_v2(golds, best, null_odds)
    assert evaluate_v2(golds, preds.answers(thr))["f1"] == pytest.approx(ref["best_f1"]) == 75.0
    out = tmp_path / "out"
    assert write_official_files(preds.records(thr), out) == out / "predictions.json"
    # answering only "a" is best: "c" is wrong either way, "b" and "d" have no answer
    assert json.loads((out / "predictions.json").read_text()) == {"a": "x", "b": "", "c": "", "d": ""}
    assert json.loads((out / "null_odds.json").read_text()) == null_odds
    assert set(json.loads((out / "nbest_predictions.json").read_text())) == set(best)


def test_missing_model_output_is_an_error():
    ex, (f,) = _setup()
    with pytest.raises(KeyError, match="no model output"):
        postprocess_span([ex], [f], [])
