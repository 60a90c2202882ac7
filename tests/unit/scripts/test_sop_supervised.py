"""scripts/sop_supervised.py's labelled pairs: the library's SOP instances, read back from the shards with
the right label on each (``in_order`` / ``swapped``) and the B-from-another-document instances left out."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from data_support import make_tokenizer, planted_order_documents, train_spm, wiki_documents, write_documents
from script_support import script_module

from albert_lm.data.pipeline import PrepareConfig, prepare


@pytest.fixture(scope="module")
def script():
    with script_module("sop_supervised.py", "sop_supervised_script") as module:
        yield module


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory):
    return make_tokenizer(train_spm(tmp_path_factory.mktemp("spm") / "spiece.model", vocab_size=1000))


def test_pairs_carry_the_order_label_and_leave_out_random_b(script, tok, tmp_path: Path) -> None:
    # each planted document opens with "Overview:", so an in-order pair's A starts with it and a swapped
    # pair's B does; the one-sentence documents can only pair with a B from another document
    single = [[s] for s in wiki_documents()[0][:6]]
    docs = planted_order_documents() + single
    src = write_documents(tmp_path / "docs.txt", docs)
    data = tmp_path / "data"
    prepare([src], tok, data, PrepareConfig(max_seq_length=128, dupe_factor=5, shard_chars=30000))
    manifest = json.loads((data / "manifest.json").read_text())
    instances = sum(s["instances"] for s in manifest["shards"])

    stats = script.shards_to_csv(data, tmp_path / "pairs.csv", tok)
    with (tmp_path / "pairs.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))

    assert stats["rows"] == len(rows) and stats["random_b_left_out"] > 0
    assert stats["rows"] + stats["random_b_left_out"] == instances
    assert stats["swapped"] == sum(r["label"] == "swapped" for r in rows)
    assert 0.3 < stats["swapped"] / len(rows) < 0.7
    planted = [r for r in rows if "overview" in (r["a"] + r["b"]).lower()]
    assert len(planted) > 50
    for r in planted:
        opens = "a" if r["a"].lower().lstrip().startswith("overview") else "b"
        assert r["label"] == ("in_order" if opens == "a" else "swapped"), r
    # cached: a second call reads the counts back instead of rewriting the file
    assert script.shards_to_csv(data, tmp_path / "pairs.csv", tok) == stats


def test_sop_vs_nsp_keeps_the_supervised_section_when_it_rewrites_its_report(script, tmp_path, monkeypatch):
    study = sys.modules["sop_vs_nsp"]  # imported by sop_supervised.py
    doc = tmp_path / "sop_vs_nsp.md"
    monkeypatch.setattr(study, "DOC", doc)
    assert study.kept_section() == ""  # no report yet
    begin, end = study.KEEP
    doc.write_text(
        f"# old tables\n\n{begin}\n## Supervised\n\n| a | b |\n{end}\n\nold footer\n", encoding="utf-8"
    )
    kept = study.kept_section()
    assert kept == f"\n{begin}\n## Supervised\n\n| a | b |\n{end}\n"
    doc.write_text(f"{end} then {begin}", encoding="utf-8")  # markers out of order: nothing to keep
    assert study.kept_section() == ""
