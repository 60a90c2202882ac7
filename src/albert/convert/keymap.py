"""Templated name tables between our parameter names and foreign checkpoint names (torchtitan-style
state-dict adapters). All foreign naming of the package lives in `albert.convert`.

A table maps one of our name templates to one foreign template, or to several foreign templates whose
tensors are concatenated along dim 0 in ours (the fused QKV projection). Placeholders:

    {p}   weight | bias
    {k}   kernel | bias   (the TF dense-layer variable of that {p}; foreign side only)
    {a}   index of one of our attention blocks     (foreign side: {g} = a // I, {i} = a % I, {l} = a // I)
    {f}   index of one of our feed-forward blocks  (same foreign placeholders)

With I = inner_group_num: for fully shared ALBERT, block k is group k // I, inner layer k % I; for
no sharing (BERT, or ALBERT with one group per layer), block k is layer k // I. Partial sharing
(attention-only or FFN-only, paper Table 4) has no foreign equivalent and is saved under our own names.
"""

from __future__ import annotations

from dataclasses import dataclass

from albert.config import AlbertConfig, ConfigError
from albert.model import HEADS

P = ("weight", "bias")
TF_DENSE = {"weight": "kernel", "bias": "bias"}


@dataclass(frozen=True)
class KeyRule:
    """One of our tensors and the foreign tensor(s) it is made of (several: concatenated along dim 0)."""

    ours: str
    theirs: tuple[str, ...]


def has_foreign_layout(config: AlbertConfig) -> bool:
    """Whether Hugging Face / TF naming can express this sharing (all or none; not attention / ffn)."""
    return config.sharing in ("all", "none")


def expand(table: dict[str, str | tuple[str, ...]], config: AlbertConfig) -> list[KeyRule]:
    """Expand a templated table into concrete rules for ``config``."""
    inner = config.inner_group_num
    rules: list[KeyRule] = []
    for ours_t, theirs_t in table.items():
        theirs_ts = (theirs_t,) if isinstance(theirs_t, str) else tuple(theirs_t)
        if "{a}" in ours_t:
            blocks = [("a", k) for k in range(config.num_attention_blocks)]
        elif "{f}" in ours_t:
            blocks = [("f", k) for k in range(config.num_ffn_blocks)]
        else:
            blocks = [("", -1)]
        params = P if "{p}" in ours_t else ("",)
        for kind, k in blocks:
            for p in params:
                fields: dict[str, object] = {"p": p, "k": TF_DENSE.get(p, p)}
                if kind:
                    fields.update({kind: k, "g": k // inner, "i": k % inner, "l": k // inner})
                rules.append(KeyRule(ours_t.format(**fields), tuple(t.format(**fields) for t in theirs_ts)))
    return rules


# ---------------------------------------------------------------------------------- Hugging Face ALBERT
HF_ALBERT_BACKBONE: dict[str, str | tuple[str, ...]] = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.position.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.{p}": "embeddings.LayerNorm.{p}",
    "embeddings.project.{p}": "encoder.embedding_hidden_mapping_in.{p}",
    "encoder.attention.{a}.qkv.{p}": (
        "encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.query.{p}",
        "encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.key.{p}",
        "encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.value.{p}",
    ),
    "encoder.attention.{a}.out.{p}": "encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.dense.{p}",
    "encoder.attention.{a}.norm.{p}": "encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.LayerNorm.{p}",
    "encoder.ffn.{f}.up.{p}": "encoder.albert_layer_groups.{g}.albert_layers.{i}.ffn.{p}",
    "encoder.ffn.{f}.down.{p}": "encoder.albert_layer_groups.{g}.albert_layers.{i}.ffn_output.{p}",
    "encoder.ffn.{f}.norm.{p}": "encoder.albert_layer_groups.{g}.albert_layers.{i}.full_layer_layer_norm.{p}",
    "pooler.{p}": "pooler.{p}",
}

# ALBERT's SQuAD 2.0 answer-verifier head (albert.model.squad_head) has no Hugging Face class: its tensors
# keep our names in a Hugging Face directory (transformers loads the encoder and ignores them).
SQUAD_V2_HEAD: dict[str, str | tuple[str, ...]] = {
    f"squad.{m}.{{p}}": f"squad.{m}.{{p}}"
    for m in ("start", "end_dense", "end_norm", "end_out", "answer_dense", "answer_out")
}

# ---------------------------------------------------------------------------------- Hugging Face BERT
HF_BERT_BACKBONE: dict[str, str | tuple[str, ...]] = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.position.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.{p}": "embeddings.LayerNorm.{p}",
    "encoder.attention.{a}.qkv.{p}": (
        "encoder.layer.{l}.attention.self.query.{p}",
        "encoder.layer.{l}.attention.self.key.{p}",
        "encoder.layer.{l}.attention.self.value.{p}",
    ),
    "encoder.attention.{a}.out.{p}": "encoder.layer.{l}.attention.output.dense.{p}",
    "encoder.attention.{a}.norm.{p}": "encoder.layer.{l}.attention.output.LayerNorm.{p}",
    "encoder.ffn.{f}.up.{p}": "encoder.layer.{l}.intermediate.dense.{p}",
    "encoder.ffn.{f}.down.{p}": "encoder.layer.{l}.output.dense.{p}",
    "encoder.ffn.{f}.norm.{p}": "encoder.layer.{l}.output.LayerNorm.{p}",
    "pooler.{p}": "pooler.dense.{p}",
}


# ---------------------------------------------------------------------------------- Hugging Face heads
def _hf_heads(mlm: str, mlm_bias: str, sentence_pair: str) -> dict[str, dict[str, str | tuple[str, ...]]]:
    """Name tables of the heads of `albert.model.HEADS`; ALBERT and BERT differ only in the MLM scope and
    the sentence-pair head (SOP / NSP)."""
    mlm_table: dict[str, str | tuple[str, ...]] = {
        "mlm.dense.{p}": f"{mlm}.dense.{{p}}",
        "mlm.norm.{p}": f"{mlm}.LayerNorm.{{p}}",
        "mlm.bias": mlm_bias,
    }
    return {
        "pretraining": {**mlm_table, "sop.{p}": sentence_pair},
        "mlm": mlm_table,
        "classification": {"classifier.{p}": "classifier.{p}"},
        "multiple_choice": {"classifier.{p}": "classifier.{p}"},
        "question_answering": {"qa.{p}": "qa_outputs.{p}"},
        "squad_v2": SQUAD_V2_HEAD,
    }


#: model_type -> head name -> name table
HF_HEADS = {
    "albert": _hf_heads("predictions", "predictions.bias", "sop_classifier.classifier.{p}"),
    "bert": _hf_heads("cls.predictions.transform", "cls.predictions.bias", "cls.seq_relationship.{p}"),
}
#: Heads without a transformers class: their directory names the bare encoder (AlbertModel / BertModel).
HF_WITHOUT_CLASS = frozenset({"squad_v2"})


def hf_architecture(model_type: str, head: str | None) -> str:
    """The transformers class of a model (config.json ``architectures``): our classes carry transformers'
    ALBERT names (`albert.model.HEADS`); BERT's are the same with ``Bert`` for ``Albert``."""
    name = HEADS[None if head in HF_WITHOUT_CLASS else head].__name__
    return name if model_type == "albert" else "Bert" + name.removeprefix("Albert")


def head_of_architecture(architecture: str) -> str | None:
    """The inverse of `hf_architecture`: the head of ``AlbertForMaskedLM``, ``BertModel``, ...

    Raises:
        ConfigError: an architecture that none of `albert.model.HEADS` reads.
    """
    heads = {hf_architecture(t, h): h for t in HF_HEADS for h in HEADS if h not in HF_WITHOUT_CLASS}
    if architecture not in heads:
        raise ConfigError(f"architecture {architecture!r} is none of ours: {', '.join(sorted(heads))}")
    return heads[architecture]


#: Foreign tensors that are copies of others (tied) and are neither required nor errors when present.
HF_TIED = {
    "predictions.decoder.weight",
    "predictions.decoder.bias",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
}
#: Foreign buffers that carry no learned value.
HF_BUFFERS_SUFFIXES = ("position_ids", "token_type_ids")

# Our backbone lives under this attribute in task models; Hugging Face's under "albert." / "bert.".
OUR_BACKBONE_PREFIX = "albert."
HF_BACKBONE_PREFIX = {"albert": "albert.", "bert": "bert."}


def hf_head_rules(config: AlbertConfig, head: str) -> list[KeyRule]:
    """Rules of one head (names are the same with or without the backbone prefix)."""
    return expand(HF_HEADS[config.model_type][head], config)


def hf_rules(config: AlbertConfig, head: str | None, *, bare: bool) -> list[KeyRule]:
    """Concrete our-name <-> HF-name rules for a model with ``head`` (None: bare encoder).

    ``bare``: names as a bare `AlbertModel` / `BertModel` has them (no backbone prefix on either side).
    """
    rules = expand(HF_ALBERT_BACKBONE if config.model_type == "albert" else HF_BERT_BACKBONE, config)
    if not config.has_projection:
        rules = [r for r in rules if not r.ours.startswith("embeddings.project.")]
    if not bare:
        theirs_prefix = HF_BACKBONE_PREFIX[config.model_type]
        rules = [
            KeyRule(OUR_BACKBONE_PREFIX + r.ours, tuple(theirs_prefix + t for t in r.theirs)) for r in rules
        ]
    if head is not None:
        rules += hf_head_rules(config, head)
    return rules
