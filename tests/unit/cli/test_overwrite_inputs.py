"""`--overwrite` never deletes a command's own input: an output that is, contains or lies inside an input is
refused before anything is written (`albert_lm._locks.check_overwrite_inputs`, the one check, fine-tuning's
``--init`` included)."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_support import WIKI_SAMPLE, train_spm
from inference_support import make_model_dir


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_relations(tmp_path):
    from albert_lm._locks import OutputOverlapError, check_overwrite_inputs

    d = tmp_path / "d"
    check_overwrite_inputs(tmp_path / "other", {"--input": [d / "a.txt"], "--model": None})
    for output, how in ((d, "is"), (tmp_path, "contains"), (d / "sub", "lies inside")):
        with pytest.raises(OutputOverlapError, match=f"the output {how} --model"):
            check_overwrite_inputs(output, {"--model": d})
    check_overwrite_inputs(d / "preds.jsonl", {"--model": d}, whole_dir=False)  # a file inside: fine
    with pytest.raises(OutputOverlapError, match="the output is --input"):
        check_overwrite_inputs(d / "x.txt", {"--input": ["-", d / "x.txt"]}, whole_dir=False)


def test_export_onnx_into_its_model_run_is_refused(tmp_path, capsys):
    from albert_lm.cli.main import main

    run = make_model_dir(tmp_path / "run")
    before = _files(run)
    for output in (run, run / "onnx", tmp_path):
        assert main(["export", "onnx", "--model", str(run), "--output", str(output), "--overwrite"]) == 1
        assert "which replacing it would delete" in _one_line(capsys)
    assert (
        main(["export", "sentence-transformers", "--model", str(run), "--output", str(run), "--overwrite"])
        == 1
    )
    assert "the output is --model" in _one_line(capsys)
    assert _files(run) == before


def test_convert_into_the_checkpoint_directory_is_refused(tmp_path, capsys):
    from albert_lm.cli.main import main

    ckpt = tmp_path / "albert_base"
    ckpt.mkdir()
    (ckpt / "model.ckpt-1.index").write_bytes(b"not read")
    before = _files(ckpt)
    assert main(["convert", "tf", str(ckpt / "model.ckpt-1"), "--output", str(ckpt), "--overwrite"]) == 1
    assert "the output contains CHECKPOINT" in _one_line(capsys)
    assert _files(ckpt) == before


def test_tokenizer_train_and_prepare_over_their_corpus_are_refused(tmp_path, capsys):
    from albert_lm.cli.main import main

    d = tmp_path / "d"
    d.mkdir()
    corpus = d / "corpus.txt"
    corpus.write_bytes(WIKI_SAMPLE.read_bytes())
    spm = train_spm(tmp_path / "spiece.model", vocab_size=400)
    argv = [
        "tokenizer",
        "train",
        "--input",
        str(corpus),
        "--vocab-size",
        "300",
        "--output",
        str(d),
        "--overwrite",
    ]
    assert main(argv) == 1
    assert "the output contains --input" in _one_line(capsys)
    argv = ["prepare", "--input", str(corpus), "--tokenizer", str(spm), "--output", str(d), "--overwrite"]
    assert main(argv) == 1
    assert "the output contains --input" in _one_line(capsys)
    assert corpus.read_bytes() == WIKI_SAMPLE.read_bytes()


def test_predict_over_its_input_file_is_refused(tmp_path, capsys):
    from albert_lm.cli.main import main

    run = make_model_dir(tmp_path / "run")
    texts = tmp_path / "texts.txt"
    texts.write_text("a witty film\ndull\n", encoding="utf-8")
    assert main(["predict", "--model", str(run), "--input", str(texts), "--output", str(texts)]) == 1
    assert "the output is --input" in _one_line(capsys)
    assert texts.read_text(encoding="utf-8") == "a witty film\ndull\n"
