"""Templated name tables between our parameter names and foreign checkpoint names (torchtitan-style
state-dict adapters): Hugging Face ALBERT / BERT (`albert_lm.convert.hf`) and the TensorFlow 1 checkpoints
of google-research/albert, google-research/bert and brightmart/albert_zh (`albert_lm.convert.tf`). All
foreign naming of the package lives in `albert_lm.convert`.

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

from albert_lm.config import AlbertConfig, ConfigError
from albert_lm.model import HEADS

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

# ALBERT's SQuAD 2.0 answer-verifier head (albert_lm.model.squad_head) has no Hugging Face class: its tensors
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
    """Name tables of the heads of `albert_lm.model.HEADS`; ALBERT and BERT differ only in the MLM scope and
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
        "token_classification": {"classifier.{p}": "classifier.{p}"},
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
    ALBERT names (`albert_lm.model.HEADS`); BERT's are the same with ``Bert`` for ``Albert``."""
    name = HEADS[None if head in HF_WITHOUT_CLASS else head].__name__
    return name if model_type == "albert" else "Bert" + name.removeprefix("Albert")


def head_of_architecture(architecture: str) -> str | None:
    """The inverse of `hf_architecture`: the head of ``AlbertForMaskedLM``, ``BertModel``, ...

    Raises:
        ConfigError: an architecture that none of `albert_lm.model.HEADS` reads.
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


# ------------------------------------------------------------------ TensorFlow 1 (albert_lm.convert.tf)
_G = "bert/encoder/transformer/group_{g}/inner_group_{i}/"
TF_ALBERT_BACKBONE: dict[str, str | tuple[str, ...]] = {
    # google-research/albert modeling.py AlbertModel / transformer_model / attention_ffn_block
    "embeddings.word.weight": "bert/embeddings/word_embeddings",
    "embeddings.position.weight": "bert/embeddings/position_embeddings",
    "embeddings.token_type.weight": "bert/embeddings/token_type_embeddings",
    "embeddings.norm.weight": "bert/embeddings/LayerNorm/gamma",
    "embeddings.norm.bias": "bert/embeddings/LayerNorm/beta",
    "embeddings.project.weight": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "embeddings.project.bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "encoder.attention.{a}.qkv.weight": tuple(
        _G + f"attention_1/self/{n}/kernel" for n in ("query", "key", "value")
    ),
    "encoder.attention.{a}.qkv.bias": tuple(
        _G + f"attention_1/self/{n}/bias" for n in ("query", "key", "value")
    ),
    "encoder.attention.{a}.out.weight": _G + "attention_1/output/dense/kernel",
    "encoder.attention.{a}.out.bias": _G + "attention_1/output/dense/bias",
    # contrib layer_norm's default scopes: the first in a scope is "LayerNorm", the second "LayerNorm_1"
    "encoder.attention.{a}.norm.weight": _G + "LayerNorm/gamma",
    "encoder.attention.{a}.norm.bias": _G + "LayerNorm/beta",
    "encoder.ffn.{f}.up.weight": _G + "ffn_1/intermediate/dense/kernel",
    "encoder.ffn.{f}.up.bias": _G + "ffn_1/intermediate/dense/bias",
    "encoder.ffn.{f}.down.weight": _G + "ffn_1/intermediate/output/dense/kernel",
    "encoder.ffn.{f}.down.bias": _G + "ffn_1/intermediate/output/dense/bias",
    "encoder.ffn.{f}.norm.weight": _G + "LayerNorm_1/gamma",
    "encoder.ffn.{f}.norm.bias": _G + "LayerNorm_1/beta",
    "pooler.weight": "bert/pooler/dense/kernel",
    "pooler.bias": "bert/pooler/dense/bias",
}


def _bert_style_backbone(layer_scope: str) -> dict[str, str | tuple[str, ...]]:
    """google-research/bert modeling.py names; brightmart's albert_zh uses them under one shared scope."""
    s = f"bert/encoder/{layer_scope}/"
    return {
        "embeddings.word.weight": "bert/embeddings/word_embeddings",
        "embeddings.position.weight": "bert/embeddings/position_embeddings",
        "embeddings.token_type.weight": "bert/embeddings/token_type_embeddings",
        "embeddings.norm.weight": "bert/embeddings/LayerNorm/gamma",
        "embeddings.norm.bias": "bert/embeddings/LayerNorm/beta",
        "encoder.attention.{a}.qkv.weight": tuple(
            s + f"attention/self/{n}/kernel" for n in ("query", "key", "value")
        ),
        "encoder.attention.{a}.qkv.bias": tuple(
            s + f"attention/self/{n}/bias" for n in ("query", "key", "value")
        ),
        "encoder.attention.{a}.out.weight": s + "attention/output/dense/kernel",
        "encoder.attention.{a}.out.bias": s + "attention/output/dense/bias",
        "encoder.attention.{a}.norm.weight": s + "attention/output/LayerNorm/gamma",
        "encoder.attention.{a}.norm.bias": s + "attention/output/LayerNorm/beta",
        "encoder.ffn.{f}.up.weight": s + "intermediate/dense/kernel",
        "encoder.ffn.{f}.up.bias": s + "intermediate/dense/bias",
        "encoder.ffn.{f}.down.weight": s + "output/dense/kernel",
        "encoder.ffn.{f}.down.bias": s + "output/dense/bias",
        "encoder.ffn.{f}.norm.weight": s + "output/LayerNorm/gamma",
        "encoder.ffn.{f}.norm.bias": s + "output/LayerNorm/beta",
        "pooler.weight": "bert/pooler/dense/kernel",
        "pooler.bias": "bert/pooler/dense/bias",
    }


TF_BRIGHTMART_BACKBONE = _bert_style_backbone("layer_shared")  # brightmart/albert_zh modeling.py
TF_BERT_BACKBONE = _bert_style_backbone("layer_{l}")
BRIGHTMART_PROJECTION = "bert/embeddings/word_embeddings_2"

_MLM: dict[str, str | tuple[str, ...]] = {
    # run_pretraining.py get_masked_lm_output
    "mlm.dense.weight": "cls/predictions/transform/dense/kernel",
    "mlm.dense.bias": "cls/predictions/transform/dense/bias",
    "mlm.norm.weight": "cls/predictions/transform/LayerNorm/gamma",
    "mlm.norm.bias": "cls/predictions/transform/LayerNorm/beta",
    "mlm.bias": "cls/predictions/output_bias",
}
TF_HEADS: dict[str, dict[str, str | tuple[str, ...]]] = {
    # run_pretraining.py get_sentence_order_output (ALBERT) / get_next_sentence_output (BERT)
    "pretraining": {
        **_MLM,
        "sop.weight": "cls/seq_relationship/output_weights",
        "sop.bias": "cls/seq_relationship/output_bias",
    },
    "mlm": _MLM,
    # classifier_utils.py create_model: output_weights (num_labels, H) at the top-level scope
    "classification": {"classifier.weight": "output_weights", "classifier.bias": "output_bias"},
    # race_utils.py: the same variables with one label; choose this head with head="multiple_choice"
    "multiple_choice": {"classifier.weight": "output_weights", "classifier.bias": "output_bias"},
    # squad_utils.py v1 create_v1_model: rows (start, end)
    "question_answering": {"qa.weight": "cls/squad/output_weights", "qa.bias": "cls/squad/output_bias"},
    # squad_utils.py v2 create_v2_model (run_squad_v2.py): tf.layers.dense under three variable scopes;
    # the end and answer dense layers read concat([sequence, start features]) / concat([start, CLS])
    "squad_v2": {
        "squad.start.{p}": "start_logits/dense/{k}",
        "squad.end_dense.{p}": "end_logits/dense_0/{k}",
        "squad.end_norm.weight": "end_logits/LayerNorm/gamma",  # tf.contrib.layers.layer_norm
        "squad.end_norm.bias": "end_logits/LayerNorm/beta",
        "squad.end_out.{p}": "end_logits/dense_1/{k}",
        "squad.answer_dense.{p}": "answer_class/dense_0/{k}",
        "squad.answer_out.weight": "answer_class/dense_1/kernel",  # use_bias=False
    },
}


#: Heads no original TF script trains (google-research/albert has no token-classification script): a TF
#: checkpoint converts to them only as an encoder, the head drawn fresh by fine-tuning.
TF_WITHOUT_ORIGINAL = frozenset({"token_classification"})


def tf_rules(config: AlbertConfig, layout: str, head: str | None, *, bare: bool) -> list[KeyRule]:
    """Concrete our-name <- TF-name rules of a ``layout`` (`albert_lm.convert.tf.detect_layout`). ``bare``: our names as a bare `AlbertModel` has them."""
    table = {"google": TF_ALBERT_BACKBONE, "brightmart": TF_BRIGHTMART_BACKBONE, "bert": TF_BERT_BACKBONE}[
        layout
    ]
    rules = expand(table, config)
    if layout != "brightmart" and not config.has_projection:
        rules = [r for r in rules if not r.ours.startswith("embeddings.project.")]
    if not bare:
        rules = [KeyRule(OUR_BACKBONE_PREFIX + r.ours, r.theirs) for r in rules]
    if head is not None:
        rules += expand(TF_HEADS[head], config)
    return rules
