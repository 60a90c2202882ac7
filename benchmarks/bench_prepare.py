#!/usr/bin/env python
"""`albert prepare` throughput and peak memory, next to the original create_pretraining_data.py's algorithm.

    python benchmarks/bench_prepare.py [--tokenizer DIR] [--dupe-factor 5] [--repeat 8] [--json out.json]

Corpus: the real Wikipedia dump of ../shared/DATA.md (data/wiki/enwiki-shortened.xml.bz2), converted once
to the original's format (one sentence per line, blank line between documents); the "x8" corpus is that
file repeated 8 times. Tokenizer: ``--tokenizer`` or a 16k SentencePiece model trained on the dump first.

Each measurement runs in a fresh process and reports wall time and peak RSS (``ru_maxrss``; with worker
processes, the main process's and the largest worker's):

* ours: ``albert_lm.data.pipeline.prepare`` with 1 and 2 workers (shards of ``--shard-chars`` characters, so
  2 workers have shards to share), static masking;
* reference: the original's algorithm as it is written -- every document tokenized into memory, then
  ``dupe_factor`` passes of create_instances_from_document + create_masked_lm_predictions (with its
  per-candidate ``np.random.choice``), every instance held in a list and shuffled before writing (the TF
  record writing itself is left out, which favours the reference). Same tokenizer, same settings.

Throughput is corpus tokens per second (each corpus token is used ``dupe_factor`` times). Peak memory for
the corpus and for the corpus x8 shows whether memory grows with the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DUMP = REPO / "data" / "wiki" / "enwiki-shortened.xml.bz2"


# ------------------------------------------------------------------------------ the measured programs


def run_ours(
    corpus: str, tokenizer: str, out: str, workers: int, dupe: int, max_seq: int, shard_chars: int
) -> dict:
    from albert_lm.data.pipeline import PrepareConfig, prepare

    cfg = PrepareConfig(max_seq_length=max_seq, dupe_factor=dupe, shard_chars=shard_chars)
    t0 = time.perf_counter()
    manifest = prepare([corpus], tokenizer, out, cfg, workers=workers, overwrite=True)
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "tokens": manifest["counts"]["tokens"],
        "instances": manifest["counts"]["instances"],
    }


def run_reference(corpus: str, tokenizer: str, dupe: int, max_seq: int) -> dict:
    """The original's create_training_instances, structured as it is (all in memory, one global RNG)."""
    import random

    import numpy as np

    from albert_lm.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer)
    vocab = list(range(tok.vocab_size))
    pieces = [tok.id_to_piece(i) for i in vocab]
    from albert_lm.data.masking import is_start_piece_sp

    start = [is_start_piece_sp(p) for p in pieces]
    cls, sep, mask = tok.cls_id, tok.sep_id, tok.mask_id
    rng = random.Random(12345)
    t0 = time.perf_counter()
    all_documents: list[list[list[int]]] = [[]]
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                all_documents.append([])
            ids = tok.encode_ids(line) if line else []
            if ids:
                all_documents[-1].append(ids)
    all_documents = [d for d in all_documents if d]
    rng.shuffle(all_documents)
    n_tokens = sum(len(s) for d in all_documents for s in d)
    max_num_tokens = max_seq - 3
    ngrams = np.arange(1, 4, dtype=np.int64)
    pvals = 1.0 / np.arange(1, 4)
    pvals /= pvals.sum(keepdims=True)

    def mask_instance(tokens: list[int]) -> tuple[list[int], list[int], list[int]]:
        cand: list[list[int]] = []
        for i, t in enumerate(tokens):
            if t in (cls, sep):
                continue
            if cand and not start[t]:
                cand[-1].append(i)
            else:
                cand.append([i])
        out = list(tokens)
        num = min(20, max(1, int(round(len(tokens) * 0.15))))
        ngram_indexes = [[cand[idx : idx + n] for n in ngrams] for idx in range(len(cand))]
        rng.shuffle(ngram_indexes)
        masked: list[tuple[int, int]] = []
        covered: set[int] = set()
        for cset in ngram_indexes:
            if len(masked) >= num:
                break
            n = np.random.choice(
                ngrams[: len(cset)], p=pvals[: len(cset)] / pvals[: len(cset)].sum(keepdims=True)
            )
            index_set = sum(cset[n - 1], [])
            n -= 1
            while len(masked) + len(index_set) > num:
                if n == 0:
                    break
                index_set = sum(cset[n - 1], [])
                n -= 1
            if len(masked) + len(index_set) > num or any(i in covered for i in index_set):
                continue
            for i in index_set:
                covered.add(i)
                if rng.random() < 0.8:
                    out[i] = mask
                elif rng.random() >= 0.5:
                    out[i] = vocab[rng.randint(0, len(vocab) - 1)]
                masked.append((i, tokens[i]))
        rng.shuffle(ngram_indexes)
        masked.sort()
        return out, [p for p, _ in masked], [lab for _, lab in masked]

    instances = []
    for _ in range(dupe):
        for d_index, document in enumerate(all_documents):
            target = max_num_tokens
            if rng.random() < 0.1:
                target = rng.randint(2, max_num_tokens)
            chunk: list[list[int]] = []
            length = 0
            i = 0
            while i < len(document):
                chunk.append(document[i])
                length += len(document[i])
                if i == len(document) - 1 or length >= target:
                    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                    a = [t for s in chunk[:a_end] for t in s]
                    b: list[int] = []
                    if len(chunk) == 1:
                        is_random = True
                        for _ in range(10):
                            r = rng.randint(0, len(all_documents) - 1)
                            if r != d_index:
                                break
                        rd = all_documents[r]
                        for j in range(rng.randint(0, len(rd) - 1), len(rd)):
                            b.extend(rd[j])
                            if len(b) >= target - len(a):
                                break
                    elif rng.random() < 0.5:
                        is_random = True
                        b = [t for s in chunk[a_end:] for t in s]
                        a, b = b, a
                    else:
                        is_random = False
                        b = [t for s in chunk[a_end:] for t in s]
                    while len(a) + len(b) > max_num_tokens:
                        tr = a if len(a) > len(b) else b
                        if rng.random() < 0.5:
                            del tr[0]
                        else:
                            tr.pop()
                    tokens = [cls, *a, sep, *b, sep]
                    segment_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
                    out, pos, labels = mask_instance(tokens)
                    instances.append((out, segment_ids, is_random, pos, labels))
                    chunk, length = [], 0
                i += 1
    rng.shuffle(instances)
    return {"seconds": time.perf_counter() - t0, "tokens": n_tokens, "instances": len(instances)}


def child_main(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "ours":
        corpus, tokenizer, out, workers, dupe, max_seq, shard_chars = rest
        r = run_ours(corpus, tokenizer, out, int(workers), int(dupe), int(max_seq), int(shard_chars))
    else:
        corpus, tokenizer, dupe, max_seq = rest
        r = run_reference(corpus, tokenizer, int(dupe), int(max_seq))
    r["peak_main"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    r["peak_worker"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print("RESULT " + json.dumps(r))


def measure(args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed:\n{p.stderr[-3000:]}")
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


# ------------------------------------------------------------------------------------------- driver


def make_corpora(tmp: Path, repeat: int) -> tuple[Path, Path]:
    from albert_lm.data.documents import ReadReport, SentenceSplitter, read_documents

    splitter = SentenceSplitter("english")
    one = tmp / "wiki.txt"
    with open(one, "w", encoding="utf-8") as f:
        for doc in read_documents([DUMP], ReadReport()):
            f.write("\n".join(splitter.sentences(doc)) + "\n\n")
    many = tmp / f"wiki_x{repeat}.txt"
    text = one.read_text(encoding="utf-8")
    with open(many, "w", encoding="utf-8") as f:
        for _ in range(repeat):
            f.write(text)
    return one, many


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--tokenizer", help="tokenizer dir (default: train a 16k SentencePiece model on the dump)"
    )
    ap.add_argument("--dupe-factor", type=int, default=5)
    ap.add_argument("--max-seq-length", type=int, default=512)
    ap.add_argument(
        "--repeat", type=int, default=8, help="the large corpus is the corpus repeated this often"
    )
    ap.add_argument("--shard-chars", type=int, default=300_000)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if not DUMP.exists():
        sys.exit(f"{DUMP} missing: run `make data`")
    sys.path.insert(0, str(REPO / "src"))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        tokenizer = args.tokenizer
        if not tokenizer:
            tokenizer = str(tmp / "tok")
            subprocess.run(
                [sys.executable, "-m", "albert_lm.cli.main", "tokenizer", "train", "--input", str(DUMP),
                 "--vocab-size", "16000", "--output", tokenizer, "--quiet"],
                check=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            )  # fmt: skip
        one, many = make_corpora(tmp, args.repeat)
        D, T, S = str(args.dupe_factor), str(args.max_seq_length), str(args.shard_chars)
        res: dict[str, dict] = {}
        res["ours_w1"] = measure(["ours", str(one), tokenizer, str(tmp / "o1"), "1", D, T, S])
        res["ours_w2"] = measure(["ours", str(one), tokenizer, str(tmp / "o2"), "2", D, T, S])
        same = all(
            (tmp / "o1" / p.name).read_bytes() == p.read_bytes() for p in (tmp / "o2").iterdir()
        ) and len(list((tmp / "o1").iterdir())) == len(list((tmp / "o2").iterdir()))
        res["ours_w1_xN"] = measure(["ours", str(many), tokenizer, str(tmp / "o3"), "1", D, T, S])
        res["ours_w2_xN"] = measure(["ours", str(many), tokenizer, str(tmp / "o4"), "2", D, T, S])
        if not args.no_reference:
            res["ref"] = measure(["reference", str(one), tokenizer, D, T])
            res["ref_xN"] = measure(["reference", str(many), tokenizer, D, T])

        from albert_lm.data.stats import compute_stats

        stats = compute_stats(tmp / "o1")

    def tps(r: dict) -> float:
        return r["tokens"] / r["seconds"]

    mb = 1 / 2**20
    n = args.repeat
    print(
        f"corpus: {DUMP.name} -> {res['ours_w1']['tokens']} tokens; x{n}: {res['ours_w1_xN']['tokens']} tokens"
    )
    print(
        f"settings: max_seq_length {T}, dupe_factor {D}, static masking, shards of {S} characters; {os.cpu_count()} CPUs"
    )
    print()
    print(f"{'run':<34}{'seconds':>9}{'tokens/s':>11}{'instances':>11}{'peak MiB':>10}{'worker MiB':>11}")
    for name, r in res.items():
        print(
            f"{name:<34}{r['seconds']:9.1f}{tps(r):11.0f}{r['instances']:11d}{r['peak_main'] * mb:10.0f}"
            f"{(r['peak_worker'] * mb if name.startswith('ours_w2') else float('nan')):11.0f}"
        )
    print()
    print(
        f"ours, 2 workers vs 1:             {tps(res['ours_w2']) / tps(res['ours_w1']):.2f}x tokens/s (outputs bitwise equal: {same})"
    )
    grow = res["ours_w1_xN"]["peak_main"] / res["ours_w1"]["peak_main"]
    print(f"ours, peak memory x{n} corpus / x1:   {grow:.2f}x")
    if "ref" in res:
        print(f"ours (1 worker) vs reference:     {tps(res['ours_w1']) / tps(res['ref']):.2f}x tokens/s")
        print(
            f"reference, peak memory x{n} / x1:    {res['ref_xN']['peak_main'] / res['ref']['peak_main']:.2f}x"
        )
        print(
            f"peak memory at x{n}, reference / ours: "
            f"{res['ref_xN']['peak_main'] / res['ours_w1_xN']['peak_main']:.2f}x"
        )
    print()
    print("albert data stats on the x1 output:")
    for c in stats["checks"]:
        print(
            f"  {c['metric']:<34} {100 * c['value']:7.2f}%  target {100 * c['target']:6.2f}%  "
            f"({c['diff_points']:+.2f} points){'' if c['within_1_point'] else '  OFF'}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"results": res, "bitwise_equal_w1_w2": same, "checks": stats["checks"]}, indent=1)
        )


if __name__ == "__main__":
    main()
