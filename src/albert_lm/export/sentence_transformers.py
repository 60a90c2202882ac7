"""``albert export sentence-transformers``: a model directory -> a directory that
``sentence_transformers.SentenceTransformer(OUT)`` loads, giving mean-pooled sentence embeddings.

The layout is that of the published sentence-transformers models (all-MiniLM-L6-v2 among them):

    modules.json                        the pipeline: Transformer (the root) -> Pooling (-> Normalize)
    sentence_bert_config.json           the Transformer module: max_seq_length, do_lower_case
    config_sentence_transformers.json   model-level settings: the similarity function, versions
    1_Pooling/config.json               mean pooling over the attention mask
    2_Normalize/                        with ``normalize``: unit-length embeddings (the module has no files)
    config.json, model.safetensors      the bare encoder (AlbertModel / BertModel), as transformers reads it
    tokenizer files                     spiece.model + tokenizer.json, or vocab.txt, with their configs
    export_report.json                  the report `export_sentence_transformers` returns

An embedding is the mean of the encoder's last hidden states over the tokens that the attention mask
keeps (`mean_pool`), optionally scaled to unit length. A task model (a fine-tuned classifier, a
pretraining checkpoint) gives its encoder; its head is left behind. Partial sharing (attention-only or
FFN-only, paper Table 4) has no transformers layout: the encoder is unrolled to one block per layer
(`unshare`), which computes the same function with more stored weights.

The check that fails the export (`ExportError`): the written directory, read by ``SentenceTransformer``
(with the tokenizer that transformers builds from the directory's files) or, where sentence-transformers
is not installed, by albert, must embed `CHECK_TEXTS` as the source model does with our tokenizer,
within `TOLERANCE`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from albert_lm._io import atomic_write_dir, atomic_write_json
from albert_lm.convert.keymap import has_foreign_layout
from albert_lm.export.pipeline import ExportError, check_output_dir, resolve_source
from albert_lm.model import AlbertModel

logger = logging.getLogger(__name__)

REPORT_FILE = "export_report.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
# the parity bound: float32 encoders differ by ~1e-6 between attention kernels
TOLERANCE = 1e-5
# Texts of the export's checks: lengths that make a padded batch, case, accents, digits and
# punctuation, CJK characters, and one text longer than any max_seq_length (the truncation).
CHECK_TEXTS = (
    "A sentence embedding.",
    "The Quick Brown Fox jumps over the lazy dog, twice; then it sleeps.",
    "Café déjà vu: naïve coöperation costs 3.50 euros (or $4)!",
    "北京是中国的首都。",
    "Short",
    " ".join(["the model reads this long text and keeps only its first tokens."] * 120),
)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T, H) hidden states, (B, T) mask -> (B, H): the mean over the tokens that the mask keeps."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    # sentence-transformers' Pooling clamps the count the same way (an all-padding row gives zeros)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


def embed(
    encoder: AlbertModel,
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int,
    normalize: bool = False,
) -> torch.Tensor:
    """Sentence embeddings (len(texts), H) of ``texts``: our tokenizer (truncated to ``max_length``,
    padded to the longest), our encoder's last hidden states, `mean_pool`; unit length with ``normalize``."""
    rows = tokenizer.batch_encode(list(texts), max_length=max_length, padding="longest", num_workers=1)
    batch = {k: torch.tensor([r[k] for r in rows]) for k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        hidden = encoder(**batch).sequence_output  # (B, T, H)
    pooled = mean_pool(hidden, batch["attention_mask"])  # (B, H)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


def unshare(encoder: AlbertModel) -> AlbertModel:
    """The same encoder with ``sharing="none"``: layer position (l, i) gets a copy of the attention and
    feed-forward blocks it used (`AlbertConfig.attention_block` / ``ffn_block``). Transformers reads
    that layout as one group per layer; it computes the same function as ``encoder``."""
    config = encoder.config
    flat = config.replace(sharing="none", num_hidden_groups=config.num_hidden_layers)
    out = AlbertModel(flat, add_pooler=encoder.pooler is not None)
    out.embeddings.load_state_dict(encoder.embeddings.state_dict())
    if encoder.pooler is not None and out.pooler is not None:
        out.pooler.load_state_dict(encoder.pooler.state_dict())
    for layer in range(config.num_hidden_layers):
        for inner in range(config.inner_group_num):
            a, f = flat.attention_block(layer, inner), flat.ffn_block(layer, inner)
            out.encoder.attention[a].load_state_dict(
                encoder.encoder.attention[config.attention_block(layer, inner)].state_dict()
            )
            out.encoder.ffn[f].load_state_dict(
                encoder.encoder.ffn[config.ffn_block(layer, inner)].state_dict()
            )
    return out.eval()


def export_sentence_transformers(
    path: str | Path,
    output: str | Path,
    *,
    normalize: bool = False,
    max_seq_length: int | None = None,
    checkpoint: str = "best",
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the sentence-transformers directory ``output`` of ``path`` (see the module docstring).

    Args:
        path: a model directory or a fine-tuning run directory (its ``checkpoint``).
        output: the directory to write (atomically: a failure leaves no half-written directory).
        normalize: add a Normalize module (unit-length embeddings, as all-MiniLM-L6-v2 has).
        max_seq_length: the tokens an input is truncated to (None: the model's max_position_embeddings).
        checkpoint: ``best`` or ``last`` checkpoint of a run directory.
        overwrite: replace a non-empty ``output``.

    Returns:
        The report (also written as ``export_report.json``): source, settings, file sizes and the
        check's max |difference| of the embeddings.

    Raises:
        ExportError: a missing or unusable input, an output in the way, or a failed check.
    """
    out = Path(output)
    check_output_dir(out, overwrite)
    source = resolve_source(path, checkpoint)
    if out.resolve() == source.resolve():
        raise ExportError(f"{out}: is the model directory itself; choose another output directory")
    encoder, tokenizer = _load_encoder(source)
    config = encoder.config
    limit = config.max_position_embeddings
    length = limit if max_seq_length is None else max_seq_length
    if not 2 <= length <= limit:
        raise ExportError(
            f"max_seq_length {length} must be in [2, {limit}] (the model's max_position_embeddings)"
        )
    written = encoder if has_foreign_layout(config) else unshare(encoder)
    report: dict[str, Any] = {
        "source": str(source),
        "model_type": config.model_type,
        "sharing": config.sharing,
        "written_sharing": written.config.sharing,
        "embedding_dimension": config.hidden_size,
        "max_seq_length": length,
        "pooling": "mean",
        "normalize": normalize,
        "modules": [m["type"] for m in _modules(normalize)],
    }
    if written is not encoder:
        logger.warning(
            "sharing=%r has no transformers layout: the encoder is written with one block per layer",
            config.sharing,
        )
    ours = embed(encoder, tokenizer, CHECK_TEXTS, length, normalize)

    def write(tmp: Path) -> None:
        written.save_pretrained(tmp, tokenizer=tokenizer)  # config.json, model.safetensors, tokenizer
        _write_st_files(tmp, config.hidden_size, length, normalize)
        report["check"] = _check(tmp, tokenizer, ours, length, normalize)
        report["files"] = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        atomic_write_json(tmp / REPORT_FILE, report, indent=2)

    atomic_write_dir(out, write)
    report["output"] = str(out)
    return report


def _load_encoder(source: Path) -> tuple[AlbertModel, Any]:
    """The encoder (the backbone of a task model) in eval mode and the tokenizer of a model directory."""
    from albert_lm.config import ConfigError
    from albert_lm.convert.hf import CheckpointError, load_model
    from albert_lm.tasks.base import ModelDirError
    from albert_lm.tasks.inputs import load_model_tokenizer

    try:
        tokenizer = load_model_tokenizer(source)
        model = load_model(source)
    except (ModelDirError, ConfigError, CheckpointError, FileNotFoundError) as e:
        raise ExportError(str(e).splitlines()[0]) from None
    encoder = model if isinstance(model, AlbertModel) else model.albert
    assert isinstance(encoder, AlbertModel)
    return encoder.eval(), tokenizer


def _modules(normalize: bool) -> list[dict[str, Any]]:
    names = ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])
    paths = ["", POOLING_DIR, NORMALIZE_DIR]
    return [
        {"idx": i, "name": str(i), "path": paths[i], "type": f"sentence_transformers.models.{name}"}
        for i, name in enumerate(names)
    ]


def _write_st_files(tmp: Path, dimension: int, max_seq_length: int, normalize: bool) -> None:
    from albert_lm import __version__

    atomic_write_json(tmp / "modules.json", _modules(normalize), indent=2)
    # the tokenizer files carry the casing (do_lower_case of tokenizer_config.json, the SentencePiece
    # normalizer): sentence-transformers must not lower-case on its own
    atomic_write_json(
        tmp / "sentence_bert_config.json",
        {"max_seq_length": max_seq_length, "do_lower_case": False},
        indent=2,
    )
    atomic_write_json(
        tmp / "config_sentence_transformers.json",
        {
            "__version__": {"albert": __version__, "pytorch": torch.__version__},
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        indent=2,
    )
    (tmp / POOLING_DIR).mkdir()
    # the keys of sentence-transformers 2.x (as all-MiniLM-L6-v2 has them), which every later version reads
    pooling = {
        "word_embedding_dimension": dimension,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    atomic_write_json(tmp / POOLING_DIR / "config.json", pooling, indent=2)
    if normalize:
        (tmp / NORMALIZE_DIR).mkdir()


def _check(tmp: Path, tokenizer: Any, ours: torch.Tensor, length: int, normalize: bool) -> dict[str, Any]:
    """Max |difference| to ``ours`` of the embeddings of the written directory, read by
    sentence-transformers (its own tokenizer from the directory's files) or, where that is not installed,
    by albert; above `TOLERANCE` the export fails."""
    t0 = time.perf_counter()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # not installed (the `st` extra), or broken: albert reads the export back
        from albert_lm.convert.hf import load_model

        logger.warning("sentence-transformers cannot be imported (%s): the export is checked by albert", e)
        reader, reread = "albert", load_model(tmp).eval()
        assert isinstance(reread, AlbertModel)
        theirs = embed(reread, tokenizer, CHECK_TEXTS, length, normalize)
    else:
        st = SentenceTransformer(str(tmp), device="cpu", local_files_only=True)
        reader = "sentence_transformers"
        theirs = st.encode(
            list(CHECK_TEXTS), convert_to_tensor=True, batch_size=len(CHECK_TEXTS), show_progress_bar=False
        ).cpu()
    diff = _max_diff(ours, theirs)
    if not diff <= TOLERANCE:
        raise ExportError(
            f"the exported embeddings, read by {reader}, differ from the model's by {diff:.3g} "
            f"(tolerance {TOLERANCE:g})"
        )
    return {
        "read_by": reader,
        "texts": len(CHECK_TEXTS),
        "max_abs_diff": diff,
        "tolerance": TOLERANCE,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise ExportError(
            f"the exported model gives embeddings of shape {tuple(b.shape)}, not {tuple(a.shape)}"
        )
    return float((a.float() - b.float()).abs().max())
