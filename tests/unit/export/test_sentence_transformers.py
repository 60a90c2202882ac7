"""`albert export sentence-transformers`: the directory that `sentence_transformers.SentenceTransformer`
loads gives the embeddings of our model (our tokenizer, our encoder's last hidden states mean-pooled over
the attention mask) within 1e-5: real all-MiniLM-L6-v2 weights (also against sentence-transformers' own
mean-pooling pipeline over the original directory), a tiny ALBERT with a SentencePiece tokenizer, partial
sharing unrolled, a fine-tuned WordPiece classifier; bad inputs; the atomic write."""

from __future__ import annotations

import csv
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from data_support import train_spm
from inference_support import make_model_dir
from safetensors import safe_open

from albert_lm._io import TMP_PREFIX
from albert_lm.cli.main import main
from albert_lm.config import AlbertConfig
from albert_lm.export import sentence_transformers as ST
from albert_lm.export.pipeline import ExportError
from albert_lm.model import AlbertForPreTraining, AlbertModel
from albert_lm.tokenizer import load_tokenizer
from conftest import data_path

TOL = 1e-5  # the bound (issue 18 item 3)
TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome!",
    "Stock markets fell sharply on Tuesday, the third day of losses.",
    "Café déjà vu: naïve coöperation costs 3.50 euros (or $4).",
    "",
    " ".join(["a long input that the export truncates to its max_seq_length"] * 60),
]


@pytest.fixture(scope="module")
def st() -> Any:
    return pytest.importorskip("sentence_transformers")


def _ours(model_dir: Path, texts: list[str], max_length: int, normalize: bool) -> torch.Tensor:
    """Our reference, written out here: our tokenizer and encoder, the last hidden states averaged over
    the tokens of the attention mask."""
    tok = load_tokenizer(model_dir)
    encoder = AlbertModel.from_pretrained(model_dir).eval()
    rows = tok.batch_encode(texts, max_length=max_length, padding="longest", num_workers=1)
    ids, types, mask = (
        torch.tensor([r[k] for r in rows]) for k in ("input_ids", "token_type_ids", "attention_mask")
    )
    with torch.no_grad():
        hidden = encoder(ids, token_type_ids=types, attention_mask=mask).sequence_output  # (B, T, H)
    m = mask.unsqueeze(-1).float()  # (B, T, 1)
    pooled = (hidden * m).sum(1) / m.sum(1)
    return pooled / pooled.norm(dim=-1, keepdim=True) if normalize else pooled


def _encode(st: Any, out: Path, texts: list[str]) -> torch.Tensor:
    model = st.SentenceTransformer(str(out), device="cpu", local_files_only=True)
    return model.encode(texts, convert_to_tensor=True, batch_size=8, show_progress_bar=False).cpu()


def _export(model_dir: Path, out: Path, *flags: str) -> dict[str, Any]:
    assert (
        main(["export", "sentence-transformers", "--model", str(model_dir), "--output", str(out), *flags])
        == 0
    )
    return json.loads((out / ST.REPORT_FILE).read_text())


def _perturb(model: torch.nn.Module) -> None:
    """Trained-looking weights (the initialization's zero biases and unit norms would hide mistakes)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))


@pytest.fixture(scope="module")
def spm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny ALBERT pretraining model (shared layers, E != H) with a SentencePiece tokenizer."""
    root = tmp_path_factory.mktemp("albert")
    tok = load_tokenizer(train_spm(root / "spm" / "spiece.model", vocab_size=800))
    torch.manual_seed(1)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny", vocab_size=tok.vocab_size))
    _perturb(model)
    model.save_pretrained(root / "model", tokenizer=tok)
    return root / "model"


# ------------------------------------------------------------------------------------------ the pooling
def test_mean_pool_averages_only_the_tokens_of_the_mask() -> None:
    hidden = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]])
    pooled = ST.mean_pool(hidden, mask)
    torch.testing.assert_close(pooled[0], hidden[0].mean(0))
    torch.testing.assert_close(pooled[1], hidden[1, :2].mean(0))  # padding ignored, whatever it holds
    assert torch.equal(pooled[2], torch.zeros(4))  # an all-padding row: zeros, not NaN


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_unshare_computes_the_same_function(sharing: str) -> None:
    config = AlbertConfig.from_preset("albert-tiny", sharing=sharing, num_hidden_groups=2, inner_group_num=2)
    torch.manual_seed(0)
    encoder = AlbertModel(config).eval()
    _perturb(encoder)
    flat = ST.unshare(encoder)
    assert flat.config.sharing == "none"
    assert len(flat.encoder.attention) == len(flat.encoder.ffn) == 4 * 2  # L * I blocks each
    assert flat.num_parameters() > encoder.num_parameters()
    ids = torch.randint(5, config.vocab_size, (2, 9))
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    with torch.no_grad():
        want, got = encoder(ids, attention_mask=mask), flat(ids, attention_mask=mask)
    torch.testing.assert_close(got.sequence_output, want.sequence_output, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------- real weights
@pytest.mark.data
@pytest.mark.slow  # ~15 s of CPU: three readings of the 90 MB model and of sentence-transformers
def test_minilm_export_gives_our_embeddings_and_sentence_transformers_reference(
    st: Any, tmp_path: Path, minilm_dir: Path
) -> None:
    """all-MiniLM-L6-v2 (a sentence-transformers model: mean pooling, Normalize, 256 tokens) exported
    from our model directory: SentenceTransformer(OUT) == ours == sentence-transformers' own pipeline
    (Transformer + mean Pooling + Normalize) over the original directory and its tokenizer.json."""
    with data_path("polarity", "polarity-en-pang-lee.csv").open(encoding="utf-8-sig", newline="") as f:
        polarity = [row[1].strip() for row in csv.reader(f) if len(row) > 1]
    texts = TEXTS + random.Random(0).sample(polarity, 25)
    out = tmp_path / "minilm-st"
    report = _export(minilm_dir, out, "--normalize", "--max-seq-length", "256")

    theirs = _encode(st, out, texts)
    ours = _ours(minilm_dir, texts, 256, normalize=True)
    assert theirs.shape == (len(texts), 384)
    assert (theirs - ours).abs().max() <= TOL
    reference = st.SentenceTransformer(
        modules=[
            st.models.Transformer(str(minilm_dir), max_seq_length=256),
            st.models.Pooling(384, pooling_mode="mean"),
            st.models.Normalize(),
        ],
        device="cpu",
    )
    ref = reference.encode(texts, convert_to_tensor=True, batch_size=8, show_progress_bar=False).cpu()
    assert (theirs - ref).abs().max() <= TOL
    torch.testing.assert_close(theirs.norm(dim=-1), torch.ones(len(texts)))
    # real sentence embeddings: the paraphrase is nearer than the unrelated sentence
    cos = theirs[:3] @ theirs[:3].T
    assert cos[0, 1] > 0.5 > cos[0, 2]

    assert report["check"]["read_by"] == "sentence_transformers" and report["check"]["max_abs_diff"] <= TOL
    assert report["model_type"] == "bert" and report["max_seq_length"] == 256 and report["normalize"]
    # self-contained: the tokenizer is in OUT, and nothing points back at the source
    names = {p.name for p in out.iterdir()}
    assert {"modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"} <= names
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "1_Pooling"} <= names
    assert str(minilm_dir) not in (out / "config.json").read_text()
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 256


# ----------------------------------------------------------------------------------------- tiny models
def test_albert_sentencepiece_export(st: Any, tmp_path: Path, spm_model_dir: Path) -> None:
    out = tmp_path / "st"
    report = _export(spm_model_dir, out)
    theirs = _encode(st, out, TEXTS)
    ours = _ours(spm_model_dir, TEXTS, 128, normalize=False)  # albert-tiny: max_position_embeddings 128
    assert (theirs - ours).abs().max() <= TOL
    assert not torch.allclose(theirs.norm(dim=-1), torch.ones(len(TEXTS)))  # no Normalize module
    assert (out / "spiece.model").read_bytes() == (spm_model_dir / "spiece.model").read_bytes()
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling"]
    assert report["written_sharing"] == report["sharing"] == "all"
    assert json.loads((out / "config.json").read_text())["architectures"] == ["AlbertModel"]


def test_partial_sharing_is_unrolled(st: Any, tmp_path: Path) -> None:
    """attention-only sharing has no transformers layout: the export writes one block per layer."""
    root = tmp_path / "model"
    tok = load_tokenizer(train_spm(tmp_path / "spm" / "spiece.model", vocab_size=600))
    torch.manual_seed(2)
    model = AlbertForPreTraining(
        AlbertConfig.from_preset("albert-tiny", vocab_size=tok.vocab_size, sharing="attention")
    )
    _perturb(model)
    model.save_pretrained(root, tokenizer=tok)
    report = _export(root, tmp_path / "st", "--normalize")
    assert (report["sharing"], report["written_sharing"]) == ("attention", "none")
    theirs = _encode(st, tmp_path / "st", TEXTS)
    assert (theirs - _ours(root, TEXTS, 128, normalize=True)).abs().max() <= TOL


def test_finetuned_wordpiece_classifier_exports_its_encoder(st: Any, tmp_path: Path, capsys: Any) -> None:
    model_dir = make_model_dir(tmp_path / "clf")  # AlbertForSequenceClassification + task.json, vocab.txt
    out = tmp_path / "st"
    argv = ["export", "sentence-transformers", "--model", str(model_dir), "--output", str(out)]
    assert main([*argv, "--max-seq-length", "48"]) == 0
    printed = capsys.readouterr().out
    assert "read by sentence_transformers: max |embedding - ours| = " in printed
    texts = ["a witty , charming film .", "the cast is great and the story is funny", "awful"]
    assert (_encode(st, out, texts) - _ours(model_dir, texts, 48, normalize=False)).abs().max() <= TOL
    assert not (out / "task.json").exists()
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
    assert "embeddings.word_embeddings.weight" in names and not [n for n in names if "classifier" in n]


def _hide_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # `import` raises ImportError


def test_export_without_sentence_transformers_installed(
    tmp_path: Path, spm_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export needs only albert: without sentence-transformers, albert reads the directory back."""
    _hide_sentence_transformers(monkeypatch)
    report = ST.export_sentence_transformers(spm_model_dir, tmp_path / "st")
    assert report["check"]["read_by"] == "albert" and report["check"]["max_abs_diff"] == 0.0


# ------------------------------------------------------------------------------------ bad input, atomicity
def _fails(argv: list[str], capsys: Any) -> str:
    """``argv``: MODEL_DIR OUT, then flags."""
    assert main(["export", "sentence-transformers", "--model", argv[0], "--output", *argv[1:]]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("albert export: error: ")
    return err


def test_bad_inputs_are_one_line_errors(tmp_path: Path, spm_model_dir: Path, capsys: Any) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("not a model")
    out = tmp_path / "out"
    assert "neither a model directory" in _fails([str(tmp_path / "notes"), str(out)], capsys)
    assert "no such directory" in _fails([str(tmp_path / "missing"), str(out)], capsys)
    assert "max_seq_length 129 must be in [2, 128]" in _fails(
        [str(spm_model_dir), str(out), "--max-seq-length", "129"], capsys
    )
    assert not out.exists()
    # an output in the way: untouched without --overwrite
    assert "--overwrite" in _fails([str(spm_model_dir), str(tmp_path / "notes")], capsys)
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["a.txt"]
    # the model directory itself is never an output (albert_lm._locks.check_overwrite_inputs)
    before = sorted(p.name for p in spm_model_dir.iterdir())
    assert "the output is --model" in _fails([str(spm_model_dir), str(spm_model_dir), "--overwrite"], capsys)
    assert sorted(p.name for p in spm_model_dir.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_overwrite_replaces_and_a_failed_check_leaves_the_old_directory(
    tmp_path: Path, spm_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    _hide_sentence_transformers(monkeypatch)  # albert's check is enough here
    monkeypatch.setattr(ST, "TOLERANCE", -1.0)  # the check fails, after the files are written
    with pytest.raises(ExportError, match="differ from the model's"):
        ST.export_sentence_transformers(spm_model_dir, out, overwrite=True)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]
    monkeypatch.setattr(ST, "TOLERANCE", 1e-5)
    ST.export_sentence_transformers(spm_model_dir, out, overwrite=True)
    assert not (out / "old.txt").exists() and (out / "modules.json").is_file()
