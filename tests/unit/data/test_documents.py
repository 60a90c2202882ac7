"""Corpus readers, bad input, wiki markup stripping and sentence splitting."""

from __future__ import annotations

import bz2
import json
import logging
from pathlib import Path

import pytest

from albert_lm.data.documents import DataError, ReadReport, SentenceSplitter, read_documents
from albert_lm.data.wiki_markup import strip_wiki_markup
from conftest import data_path


def read(paths, fmt="auto", strict=False, **kw):
    report = ReadReport(strict=strict)
    docs = list(read_documents([Path(p) for p in paths], report, fmt, **kw))
    return docs, report


def test_lines_format(tmp_path: Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text("\ufeffFirst sentence.\nSecond one.\n\n\n  \nThird.\n", encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("Other file.\n", encoding="utf-8")
    docs, report = read([a, b])
    assert [d.units for d in docs] == [["First sentence.", "Second one."], ["Third."], ["Other file."]]
    assert [d.line for d in docs] == [1, 6, 1]  # the BOM is dropped; a file's end ends its document
    assert all(d.presplit for d in docs)
    assert report.documents == 3 and not report.skipped


def test_bad_lines_are_counted_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = tmp_path / "bad.txt"
    p.write_bytes(b"Good line.\nBad \xff\xfe line.\n" + b"x" * 5000 + b"\nAfter.\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        docs, report = read([p, empty], max_line_bytes=1000)
    assert docs[0].units == ["Good line.", "After."]
    assert report.skipped == {"invalid_utf8_lines": 1, "long_lines": 1, "empty_files": 1}
    assert f"{p}:2: invalid utf8 lines" in caplog.text
    assert f"{p}:3: long lines" in caplog.text
    with pytest.raises(DataError, match=rf"{p}:2: invalid utf8 lines \(byte 4"):
        read([p], strict=True)
    with pytest.raises(DataError, match=r"no such file"):
        read([tmp_path / "missing.txt"])


def test_jsonl_format(tmp_path: Path) -> None:
    p = tmp_path / "docs.jsonl"
    lines = [
        json.dumps({"text": "Para one. Still one.\nPara two."}),
        "{not json",
        json.dumps({"body": "wrong key"}),
        json.dumps({"text": "   "}),
        json.dumps({"text": "Last."}),
    ]
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs, report = read([p])
    assert [d.units for d in docs] == [["Para one. Still one.", "Para two."], ["Last."]]
    assert [d.line for d in docs] == [1, 5]
    assert report.skipped == {"invalid_json_lines": 1, "missing_text_field": 1, "empty_documents": 1}
    with pytest.raises(DataError, match=rf"{p}:2: invalid json lines \(not valid JSON \(Expecting"):
        read([p], strict=True)


def test_text_format(tmp_path: Path) -> None:
    p = tmp_path / "novel.txt"
    p.write_text("A wrapped\nparagraph here.\n\nSecond paragraph.\n\n" + "Long one. " * 20 + "\n\nTail.\n")
    docs, report = read([p], "text", max_doc_chars=100)
    assert docs[0].units[:2] == ["A wrapped paragraph here.", "Second paragraph."]
    assert not docs[0].presplit
    # cut at the first paragraph break past max_doc_chars
    assert len(docs) == 2 and len(docs[0].units) == 3 and docs[1].units == ["Tail."]
    assert report.skipped["split_long_documents"] == 1


WIKI = """{{Infobox thing|name=X|value={{nested|a}}}}
'''Albedo''' ({{IPA|x}}) is the [[diffuse reflection|diffuse reflectivity]] of a [[surface]].<ref>A. Cite, 2003</ref> It was
named by [[Johann Heinrich Lambert|Lambert]] in ''Photometria''.<ref name="x"/>
[[File:Albedo.svg|thumb|A caption with [[a link]] inside]]
<!-- hidden comment -->
== History ==
* a list item
{| class="wikitable"
| cell || cell
|}
See [http://example.org the site] and &nbsp;more.

== See also ==
Everything after this is dropped.
"""


def test_strip_wiki_markup() -> None:
    paras = strip_wiki_markup(WIKI)
    assert paras == [
        "Albedo is the diffuse reflectivity of a surface. It was",
        "named by Lambert in Photometria.",
        "See the site and more.",
    ]


def test_wiki_reader(tmp_path: Path) -> None:
    xml = f"""<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">
  <page><title>Albedo</title><ns>0</ns><revision><text xml:space="preserve">{WIKI.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")}</text></revision></page>
  <page><title>Old</title><ns>0</ns><redirect title="New"/><revision><text>#REDIRECT [[New]]</text></revision></page>
  <page><title>Talk:X</title><ns>1</ns><revision><text>talk</text></revision></page>
  <page><title>Empty</title><ns>0</ns><revision><text>{{{{stub}}}}</text></revision></page>
</mediawiki>"""
    p = tmp_path / "dump.xml.bz2"
    p.write_bytes(bz2.compress(xml.encode("utf-8")))
    docs, report = read([p])
    assert len(docs) == 1 and docs[0].units[0].startswith("Albedo is the diffuse")
    assert report.skipped == {"non_article_pages": 2, "empty_documents": 1}
    broken = tmp_path / "broken.xml"
    broken.write_text("<mediawiki>\n<page><title>x</title>\n</mediawiki>")
    with pytest.raises(DataError, match=rf"{broken}:3:\d+: invalid XML"):
        read([broken])


@pytest.mark.data
def test_real_wiki_dump(wiki_dump: Path) -> None:
    docs, report = read([wiki_dump])
    assert len(docs) == 105  # 206 pages: 100 redirects or non-article pages, 1 list with no prose
    assert docs[0].units[0].startswith("Anarchism is a political philosophy")
    assert report.skipped == {"non_article_pages": 100, "empty_documents": 1}
    text = " ".join(u for d in docs for u in d.units)
    assert "{{" not in text and "[[" not in text and "<ref" not in text and "'''" not in text
    assert 2_000_000 < len(text) < 3_500_000


def test_sentence_splitter() -> None:
    en = SentenceSplitter("english")
    assert en.split(
        "Dr. Smith went to Washington D.C. in 1999. He was tired! Was he? Yes, e.g. this one."
    ) == [
        "Dr. Smith went to Washington D.C. in 1999.",
        "He was tired!",
        "Was he?",
        "Yes, e.g. this one.",
    ]
    zh = SentenceSplitter("chinese")
    assert zh.split("今天天气很好。我们去公园吧！你去吗？好的") == [
        "今天天气很好。",
        "我们去公园吧！",
        "你去吗？",
        "好的",
    ]
    auto = SentenceSplitter("auto")
    assert auto.split("他说：“走吧。”然后走了。") == ["他说：“走吧。”", "然后走了。"]
    assert auto.split("One. Two.") == ["One.", "Two."]
    with pytest.raises(ValueError, match="unknown sentence-splitter language 'klingon'"):
        SentenceSplitter("klingon")


def test_chinese_news_sentences() -> None:
    path = data_path("zh_news", "199801.txt")
    line = next(ln for ln in path.read_text(encoding="utf-8").splitlines() if "。" in ln)
    text = "".join(tok.rsplit("/", 1)[0] for tok in line.split()[1:])  # strip the POS tags and the id
    sentences = SentenceSplitter("auto").split(text)
    assert len(sentences) >= 2 and all(s.endswith(("。", "！", "？", "”")) for s in sentences[:-1])
    assert "".join(sentences) == text.replace(" ", "")
