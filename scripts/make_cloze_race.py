#!/usr/bin/env python3
"""Make a RACE-layout cloze set from the Wikipedia dump (data/wiki/enwiki-shortened.xml.bz2).

Each "article" is a run of consecutive sentences of one Wikipedia page; each of its "questions" is one
of the sentences that follow the run, with one content word blanked (``_``), and four candidate words:
the blanked word and three other content words of the same page (same capitalisation class, none of
them in the question sentence). The answer therefore cannot be found by looking for the candidate that
occurs in the article or on the page; it takes reading the sentence (and the article). Chance is 25%.

Pages are assigned to train / dev / test by their position (every 10th page to test, the one after it to
dev), so no page contributes to two splits. An article of fewer than ``--level-words`` words goes to
``middle``, a longer one to ``high`` (only to exercise the per-level accuracy of the RACE task).

Output: ``OUT/RACE/{train,dev,test}/{middle,high}/<page>-<n>.txt``, one JSON object per file with
``article``, ``questions``, ``options``, ``answers`` and ``id``, as the RACE release.

    python scripts/make_cloze_race.py --out data/cloze_race
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Words too common to be a fair blank (function words); content words only.
STOPWORDS = set(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "although",
        "among",
        "another",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "either",
        "every",
        "from",
        "further",
        "have",
        "having",
        "here",
        "hers",
        "herself",
        "himself",
        "into",
        "itself",
        "just",
        "many",
        "more",
        "most",
        "much",
        "must",
        "neither",
        "none",
        "only",
        "other",
        "ours",
        "ourselves",
        "over",
        "same",
        "shall",
        "should",
        "since",
        "some",
        "such",
        "than",
        "that",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "upon",
        "very",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "whom",
        "whose",
        "will",
        "with",
        "within",
        "without",
        "would",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)
WORD = re.compile(r"(?<![\w'’-])([A-Za-z]{4,})(?![\w'’-])")


def content_words(sentence: str) -> list[str]:
    return [w for w in WORD.findall(sentence) if w.lower() not in STOPWORDS]


def blank_question(sentence: str, rng: random.Random) -> tuple[str, str] | None:
    """(question with one word replaced by "_", the word), or None when the sentence has no candidate."""
    if "_" in sentence:
        return None
    cands = [m for m in WORD.finditer(sentence) if m.group(1).lower() not in STOPWORDS]
    if not cands:
        return None
    m = rng.choice(cands)
    return sentence[: m.start()] + "_" + sentence[m.end() :], m.group(1)


def distractors(
    answer: str, question: str, pool: list[str], rng: random.Random, k: int = 3
) -> list[str] | None:
    """k words of the page's pool, of the answer's capitalisation class, not in the question, distinct."""
    cap = answer[0].isupper()
    in_question = {w.lower() for w in WORD.findall(question)}
    cands = sorted(
        {
            w
            for w in pool
            if w[0].isupper() == cap and w.lower() != answer.lower() and w.lower() not in in_question
        }
    )
    if len(cands) < k:
        return None
    picked: list[str] = []
    seen = {answer.lower()}
    for w in rng.sample(cands, len(cands)):
        if w.lower() not in seen:
            picked.append(w)
            seen.add(w.lower())
        if len(picked) == k:
            return picked
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wiki", type=Path, default=REPO / "data" / "wiki" / "enwiki-shortened.xml.bz2")
    ap.add_argument("--out", type=Path, default=REPO / "data" / "cloze_race")
    ap.add_argument("--article-sentences", type=int, default=5, help="sentences per article")
    ap.add_argument("--questions", type=int, default=2, help="questions per article (the sentences after it)")
    ap.add_argument("--min-words", type=int, default=8, help="shortest question sentence, in words")
    ap.add_argument("--max-words", type=int, default=50, help="longest question sentence, in words")
    ap.add_argument("--level-words", type=int, default=110, help="articles shorter than this go to 'middle'")
    ap.add_argument("--max-train-questions", type=int, help="stop adding training questions after this many")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not args.wiki.is_file():
        print(f"{args.wiki} missing: run `python scripts/fetch_data.py`", file=sys.stderr)
        return 2

    from albert_lm.data.documents import ReadReport, SentenceSplitter, read_documents

    rng = random.Random(args.seed)
    splitter = SentenceSplitter("english")
    root = args.out / "RACE"
    if root.exists():
        shutil.rmtree(root)
    counts: Counter[tuple[str, str]] = Counter()
    files: Counter[str] = Counter()
    for page, doc in enumerate(read_documents([args.wiki], ReadReport(), fmt="wiki")):
        split = "test" if page % 10 == 0 else "dev" if page % 10 == 1 else "train"
        train_total = counts[("train", "middle")] + counts[("train", "high")]
        if (
            split == "train"
            and args.max_train_questions is not None
            and train_total >= args.max_train_questions
        ):
            continue
        sentences = [s for s in splitter.sentences(doc) if len(s.split()) >= 3]
        pool = [w for s in sentences for w in content_words(s)]
        step = args.article_sentences + args.questions
        for n, start in enumerate(range(0, len(sentences) - step + 1, step)):
            article = " ".join(sentences[start : start + args.article_sentences])
            questions, options, answers = [], [], []
            for s in sentences[start + args.article_sentences : start + step]:
                if not args.min_words <= len(s.split()) <= args.max_words:
                    continue
                made = blank_question(s, rng)
                if made is None:
                    continue
                q, answer = made
                others = distractors(answer, s, pool, rng)
                if others is None:
                    continue
                opts = [answer, *others]
                rng.shuffle(opts)
                questions.append(q)
                options.append(opts)
                answers.append("ABCD"[opts.index(answer)])
            if not questions:
                continue
            level = "middle" if len(article.split()) < args.level_words else "high"
            name = f"{page:04d}-{n:03d}.txt"
            d = root / split / level
            d.mkdir(parents=True, exist_ok=True)
            record = {
                "id": name,
                "article": article,
                "questions": questions,
                "options": options,
                "answers": answers,
            }
            (d / name).write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
            counts[(split, level)] += len(questions)
            files[split] += 1
    for split in ("train", "dev", "test"):
        total = counts[(split, "middle")] + counts[(split, "high")]
        print(
            f"{split:5s}: {files[split]:5d} articles, {total:5d} questions "
            f"(middle {counts[(split, 'middle')]}, high {counts[(split, 'high')]})"
        )
    print(f"written under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
