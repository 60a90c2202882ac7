"""`albert prepare --language chinese`: the one switch for Chinese data (sentences at 。！？, whole-word
masking over jieba words, a WordPiece vocabulary required), on an excerpt of the People's Daily corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from data_support import FIXTURES, WIKI_SAMPLE, make_tokenizer, train_spm

from albert_lm.cli.main import main as cli_main
from albert_lm.data.documents import DataError
from albert_lm.data.instances import instance_token_ids, instance_word_starts
from albert_lm.data.pipeline import PrepareConfig, config_hash, prepare
from albert_lm.data.shards import ShardReader, load_manifest, tokenizer_info
from conftest import data_path

ZH_SAMPLE = FIXTURES / "zh_news_sample.jsonl"  # 12 articles of data/zh_news/people_daily.jsonl


@pytest.fixture(scope="module")
def zh_vocab() -> Path:
    pytest.importorskip("jieba")
    return data_path("zh_vocab", "vocab.txt")


def test_language_chinese_sets_whole_word_masking() -> None:
    assert PrepareConfig(language="chinese").zh_whole_word is True
    assert PrepareConfig(language="chinese", zh_whole_word=False).zh_whole_word is False
    assert PrepareConfig().zh_whole_word is False and PrepareConfig(language="auto").zh_whole_word is False
    assert PrepareConfig(language="auto", zh_whole_word=True).zh_whole_word is True


def test_english_settings_keep_their_config_hash(tmp_path: Path) -> None:
    """The default became None -> False: an existing English DATA_DIR's settings hash is unchanged."""
    tok = make_tokenizer(train_spm(tmp_path / "s.model", vocab_size=300))
    info = tokenizer_info(tok)
    assert config_hash(PrepareConfig(), info) == config_hash(PrepareConfig(zh_whole_word=False), info)


def test_chinese_needs_a_wordpiece_vocabulary(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spm = train_spm(tmp_path / "s.model", vocab_size=300)
    rc = cli_main(
        ["prepare", "--input", str(WIKI_SAMPLE), "--tokenizer", str(spm), "--output", str(tmp_path / "o"),
         "--language", "chinese"]
    )  # fmt: skip
    assert rc == 1
    err = capsys.readouterr().err
    assert "--language chinese needs a WordPiece vocabulary (vocab.txt" in err and "sentencepiece" in err
    with pytest.raises(DataError, match="needs a WordPiece vocabulary"):
        prepare([WIKI_SAMPLE], make_tokenizer(spm), tmp_path / "p", PrepareConfig(language="chinese"))
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def _words(seq: np.ndarray, starts: np.ndarray, specials: set[int]) -> list[list[int]]:
    """The positions of ``seq`` but [CLS]/[SEP], grouped into words: a word runs from a start to the next."""
    words: list[list[int]] = []
    for p in range(len(seq)):
        if int(seq[p]) in specials:
            continue
        if starts[p] or not words:
            words.append([])
        words[-1].append(p)
    return words


def test_cli_language_chinese_masks_whole_jieba_words(tmp_path: Path, zh_vocab: Path) -> None:
    import jieba

    out = tmp_path / "zh"
    rc = cli_main(
        ["prepare", "--input", str(ZH_SAMPLE), "--tokenizer", str(zh_vocab), "--output", str(out),
         "--language", "chinese", "--max-seq-length", "64", "--dupe-factor", "2"]
    )  # fmt: skip
    assert rc == 0
    m = load_manifest(out)
    assert m["config"]["language"] == "chinese" and m["config"]["zh_whole_word"] is True
    assert m["tokenizer"]["kind"] == "wordpiece" and m["tokenizer"]["vocab_size"] == 21128
    tok = make_tokenizer(zh_vocab)
    r = ShardReader(out / "shard-00000.bin")
    tokens, sent, ws = r["tokens"], r["sent_offsets"], r["word_start"]
    # sentences end at 。！？: the first article's first sentence, and its word starts are jieba's
    first_article = json.loads(ZH_SAMPLE.read_text(encoding="utf-8").splitlines()[0])["text"]
    first = first_article[: first_article.index("。") + 1]
    ids, offsets = tok.encode_with_offsets(first)
    assert tokens[sent[0] : sent[1]].tolist() == ids
    jieba_starts = {start for _, start, _ in jieba.tokenize(first)}
    # a piece starts a word when it is not a ## continuation and, for a Chinese character, jieba starts one
    want = [
        not tok.id_to_piece(i).startswith("##")
        and (s in jieba_starts or not "\u4e00" <= first[s] <= "\u9fff")
        for i, (s, _) in zip(ids, offsets)
    ]
    assert ws[sent[0] : sent[1]].astype(bool).tolist() == want
    assert sum(want) < len(want) - 5  # many multi-character words, not one word per character
    # every masked word is masked whole: all of its characters or none
    inst, off, pos = r["instances"], r["mask_offsets"], r["mask_positions"]
    masked_multi = 0
    for i in range(len(inst)):
        seq, _ = instance_token_ids(tokens, inst[i], tok.cls_id, tok.sep_id)
        starts = instance_word_starts(ws, inst[i])
        masked = set(pos[off[i] : off[i + 1]].tolist())
        for word in _words(seq, starts, {tok.cls_id, tok.sep_id}):
            hit = [p in masked for p in word]
            assert all(hit) or not any(hit), (i, list(word), sorted(masked))
            masked_multi += all(hit) and len(word) > 1
    assert masked_multi > 50
