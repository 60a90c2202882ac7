#!/usr/bin/env python
"""Write the TensorFlow checkpoint fixtures of tests/fixtures/tf/ with real TensorFlow.

The package never imports TensorFlow; this script is the one place that does, to produce test fixtures
that TensorFlow itself wrote. Run it with the project's Python; it creates a throwaway virtual
environment with ``tensorflow-cpu`` from PyPI (default /tmp/tfvenv; torch and transformers are taken
from the calling environment through a .pth file) and re-runs itself there:

    python scripts/make_tf_fixture.py [--out tests/fixtures/tf] [--venv /tmp/tfvenv]

Fixtures (tiny, random weights, the official variable names and layout):

* ``google/``      a release tarball: ``albert_config.json``, ``model.ckpt-best.{index,data-00000-of-00001}``,
                   ``30k-clean.model`` (a tiny SentencePiece model trained here on data/botchan), with
                   ``adam_m``/``adam_v`` slots and ``global_step`` (google-research/albert modeling.py and
                   run_pretraining.py names; 2 groups x 2 inner groups to exercise both indices).
* ``classifier/``  a checkpoint fine-tuned through TF-Hub (``module/bert/...`` names, run_classifier_with_tfhub.py)
                   with ``output_weights``/``output_bias`` (3 labels), Adam slots, a ``checkpoint`` state file,
                   saved *sharded* over two devices (two data files).
* ``brightmart/``  brightmart/albert_zh: ``albert_config_tiny.json``, ``albert_model.ckpt``, a WordPiece
                   ``vocab.txt`` (entries of the real Chinese vocabulary, data/zh_vocab), ``lamb_m``/``lamb_v`` slots.
* ``dtypes/``      one tensor of each dtype TensorFlow saves (strings, bfloat16, half, ints, bool, empty, scalar).

Next to each: ``arrays.npz`` (every variable, by its TF name), ``expected.npz`` (for google / classifier /
brightmart: input ids and the outputs of the original model computed with TensorFlow ops from the same
arrays) and, for google / classifier, ``hf.npz``: the state dict that transformers' own converter
(``load_tf_weights_in_albert``, which needs TensorFlow) produces from the same checkpoint.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TF_VERSION = "2.21.0"  # tensorflow-cpu on PyPI for CPython 3.11 when the fixtures were made


# ------------------------------------------------------------------------------------------ bootstrap
def _bootstrap(venv: Path) -> None:
    """Create the throwaway venv (once) and re-run this script inside it."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"tensorflow-cpu=={TF_VERSION}"], check=True
        )
    # torch, transformers, sentencepiece come from this (the project's) environment, appended to sys.path
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "zz_project_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", ALBERT_TF_FIXTURE_CHILD="1")
    sys.exit(subprocess.run([str(python), __file__, *sys.argv[1:]], env=env).returncode)


# ------------------------------------------------------------------------------------------ the fixtures
def main() -> None:  # noqa: C901 - one script, top to bottom
    import numpy as np
    import tensorflow as tf

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(REPO / "tests" / "fixtures" / "tf"))
    parser.add_argument("--venv", default="/tmp/tfvenv")
    args = parser.parse_args()
    out = Path(args.out)
    tf1 = tf.compat.v1
    rng = np.random.default_rng(20191026)  # the ALBERT paper's arXiv v1 month, nothing more

    def randn(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def save_tf1(
        prefix: Path, arrays: dict[str, np.ndarray], *, two_devices: bool = False, step: int | None = None
    ):
        """Variables created with tf.compat.v1.get_variable (as the original code) and saved by
        tf.compat.v1.train.Saver; with ``two_devices`` half of them live on /cpu:1 and the sharded saver
        writes one data file per device."""
        g = tf.Graph()
        with g.as_default():
            variables = []
            for i, (name, arr) in enumerate(sorted(arrays.items())):
                device = f"/cpu:{i % 2}" if two_devices else "/cpu:0"
                with tf.device(device):
                    trainable = (
                        not name.endswith(("adam_m", "adam_v", "lamb_m", "lamb_v")) and name != "global_step"
                    )
                    variables.append(
                        tf1.get_variable(name, initializer=tf.constant(arr), trainable=trainable)
                    )
            saver = tf1.train.Saver(var_list=variables, sharded=two_devices)
            config = tf1.ConfigProto(device_count={"CPU": 2})
            with tf1.Session(graph=g, config=config) as sess:
                sess.run(tf1.global_variables_initializer())
                prefix.parent.mkdir(parents=True, exist_ok=True)
                saver.save(
                    sess, str(prefix), global_step=step, write_meta_graph=False, write_state=step is not None
                )

    def with_slots(arrays: dict[str, np.ndarray], slots: tuple[str, str]) -> dict[str, np.ndarray]:
        full = dict(arrays)
        for name, arr in arrays.items():
            for s in slots:
                full[f"{name}/{s}"] = (
                    np.abs(randn(*arr.shape)) if s.endswith("v") else randn(*arr.shape)
                ) * 0.01
        full["global_step"] = np.array(100, dtype=np.int64)
        return full

    # --------------------------------------------------------------------------- the original maths in TF
    def layer_norm(x, gamma, beta):
        # contrib.layers.layer_norm: epsilon 1e-12 (modeling.py layer_norm)
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + 1e-12) * gamma + beta

    def gelu(x):
        # modeling.py gelu: the tanh approximation
        return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2 / np.pi).astype(np.float32) * (x + 0.044715 * x**3)))

    def block(x, w, heads, names):
        """One post-LN transformer layer: names = (q, k, v, out, ln1, ffn_in, ffn_out, ln2) prefixes."""
        q, k, v, o, ln1, fi, fo, ln2 = names
        b, t, h = x.shape
        d = h // heads

        def split(z):
            return tf.transpose(tf.reshape(z, [b, t, heads, d]), [0, 2, 1, 3])

        def dense(z, scope):
            return tf.matmul(z, w[scope + "/kernel"]) + w[scope + "/bias"]

        qh, kh, vh = split(dense(x, q)), split(dense(x, k)), split(dense(x, v))
        probs = tf.nn.softmax(tf.matmul(qh, kh, transpose_b=True) / np.float32(np.sqrt(d)), axis=-1)
        ctx = tf.reshape(tf.transpose(tf.matmul(probs, vh), [0, 2, 1, 3]), [b, t, h])
        att = layer_norm(dense(ctx, o) + x, w[ln1 + "/gamma"], w[ln1 + "/beta"])
        ffn = dense(gelu(dense(att, fi)), fo)
        return layer_norm(ffn + att, w[ln2 + "/gamma"], w[ln2 + "/beta"])

    def heads_out(seq, w, table, classifier: bool):
        pooled = tf.tanh(tf.matmul(seq[:, 0], w["bert/pooler/dense/kernel"]) + w["bert/pooler/dense/bias"])
        result = {"sequence_output": seq, "pooled_output": pooled}
        if classifier:
            result["logits"] = tf.matmul(pooled, w["output_weights"], transpose_b=True) + w["output_bias"]
            return result
        p = "cls/predictions/transform/"
        x = layer_norm(
            gelu(tf.matmul(seq, w[p + "dense/kernel"]) + w[p + "dense/bias"]),
            w[p + "LayerNorm/gamma"],
            w[p + "LayerNorm/beta"],
        )
        result["mlm_logits"] = tf.matmul(x, table, transpose_b=True) + w["cls/predictions/output_bias"]
        result["sop_logits"] = (
            tf.matmul(pooled, w["cls/seq_relationship/output_weights"], transpose_b=True)
            + w["cls/seq_relationship/output_bias"]
        )
        return result

    def google_forward(w, cfg, ids, types, classifier=False):
        """modeling.py AlbertModel + run_pretraining.py heads, eager TF ops on the saved arrays."""
        e = "bert/embeddings/"
        x = tf.gather(w[e + "word_embeddings"], ids) + tf.gather(w[e + "token_type_embeddings"], types)
        x = x + w[e + "position_embeddings"][: ids.shape[1]]
        x = layer_norm(x, w[e + "LayerNorm/gamma"], w[e + "LayerNorm/beta"])
        m = "bert/encoder/embedding_hidden_mapping_in/"
        x = tf.matmul(x, w[m + "kernel"]) + w[m + "bias"]
        L, G, inner = cfg["num_hidden_layers"], cfg["num_hidden_groups"], cfg["inner_group_num"]
        for layer in range(L):
            g = int(layer / L * G)  # modeling.py transformer_model
            for i in range(inner):
                s = f"bert/encoder/transformer/group_{g}/inner_group_{i}/"
                names = (
                    s + "attention_1/self/query",
                    s + "attention_1/self/key",
                    s + "attention_1/self/value",
                    s + "attention_1/output/dense",
                    s + "LayerNorm",
                    s + "ffn_1/intermediate/dense",
                    s + "ffn_1/intermediate/output/dense",
                    s + "LayerNorm_1",
                )
                x = block(x, w, cfg["num_attention_heads"], names)
        return heads_out(x, w, w[e + "word_embeddings"], classifier)

    def brightmart_forward(w, cfg, ids, types):
        """brightmart/albert_zh modeling.py (embedding_lookup_factorized, layer_shared) + run_pretraining.py."""
        e = "bert/embeddings/"
        x = tf.matmul(tf.gather(w[e + "word_embeddings"], ids), w[e + "word_embeddings_2"])
        x = (
            x
            + tf.gather(w[e + "token_type_embeddings"], types)
            + w[e + "position_embeddings"][: ids.shape[1]]
        )
        x = layer_norm(x, w[e + "LayerNorm/gamma"], w[e + "LayerNorm/beta"])
        s = "bert/encoder/layer_shared/"
        names = (
            s + "attention/self/query",
            s + "attention/self/key",
            s + "attention/self/value",
            s + "attention/output/dense",
            s + "attention/output/LayerNorm",
            s + "intermediate/dense",
            s + "output/dense",
            s + "output/LayerNorm",
        )
        for _ in range(cfg["num_hidden_layers"]):
            x = block(x, w, cfg["num_attention_heads"], names)
        # MLM logits: x @ word_embeddings_2^T @ word_embeddings^T (brightmart run_pretraining.py)
        table = tf.matmul(w[e + "word_embeddings"], w[e + "word_embeddings_2"])
        return heads_out(x, w, table, classifier=False)

    def save_expected(path: Path, outputs: dict, ids, types) -> None:
        np.savez(path, input_ids=ids, token_type_ids=types, **{k: v.numpy() for k, v in outputs.items()})

    def google_backbone(cfg: dict) -> dict[str, np.ndarray]:
        V, E, H, F, P = (
            cfg[k]
            for k in (
                "vocab_size",
                "embedding_size",
                "hidden_size",
                "intermediate_size",
                "max_position_embeddings",
            )
        )
        a = {
            "bert/embeddings/word_embeddings": randn(V, E),
            "bert/embeddings/position_embeddings": randn(P, E),
            "bert/embeddings/token_type_embeddings": randn(cfg["type_vocab_size"], E),
            "bert/embeddings/LayerNorm/gamma": 1 + randn(E, scale=0.1),
            "bert/embeddings/LayerNorm/beta": randn(E, scale=0.1),
            "bert/encoder/embedding_hidden_mapping_in/kernel": randn(E, H),
            "bert/encoder/embedding_hidden_mapping_in/bias": randn(H, scale=0.1),
            "bert/pooler/dense/kernel": randn(H, H, scale=0.3),
            "bert/pooler/dense/bias": randn(H, scale=0.1),
        }
        for g in range(cfg["num_hidden_groups"]):
            for i in range(cfg["inner_group_num"]):
                s = f"bert/encoder/transformer/group_{g}/inner_group_{i}/"
                for n in ("query", "key", "value"):
                    a[s + f"attention_1/self/{n}/kernel"] = randn(H, H, scale=0.3)
                    a[s + f"attention_1/self/{n}/bias"] = randn(H, scale=0.1)
                a[s + "attention_1/output/dense/kernel"] = randn(H, H, scale=0.3)
                a[s + "attention_1/output/dense/bias"] = randn(H, scale=0.1)
                a[s + "ffn_1/intermediate/dense/kernel"] = randn(H, F, scale=0.3)
                a[s + "ffn_1/intermediate/dense/bias"] = randn(F, scale=0.1)
                a[s + "ffn_1/intermediate/output/dense/kernel"] = randn(F, H, scale=0.3)
                a[s + "ffn_1/intermediate/output/dense/bias"] = randn(H, scale=0.1)
                for ln in ("LayerNorm", "LayerNorm_1"):
                    a[s + ln + "/gamma"] = 1 + randn(H, scale=0.1)
                    a[s + ln + "/beta"] = randn(H, scale=0.1)
        return a

    def pretraining_heads(cfg: dict, proj_size: int) -> dict[str, np.ndarray]:
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        return {
            "cls/predictions/transform/dense/kernel": randn(H, proj_size, scale=0.3),
            "cls/predictions/transform/dense/bias": randn(proj_size, scale=0.1),
            "cls/predictions/transform/LayerNorm/gamma": 1 + randn(proj_size, scale=0.1),
            "cls/predictions/transform/LayerNorm/beta": randn(proj_size, scale=0.1),
            "cls/predictions/output_bias": randn(V, scale=0.1),
            "cls/seq_relationship/output_weights": randn(2, H),
            "cls/seq_relationship/output_bias": randn(2, scale=0.1),
        }

    def hf_convert(prefix: Path, cfg: dict, cls_name: str, **kw) -> dict[str, np.ndarray]:
        import contextlib
        import io

        import transformers
        from transformers.models.albert.modeling_albert import load_tf_weights_in_albert

        hf_cfg = transformers.AlbertConfig(
            **{
                k: cfg[k]
                for k in (
                    "vocab_size",
                    "embedding_size",
                    "hidden_size",
                    "num_hidden_layers",
                    "num_hidden_groups",
                    "inner_group_num",
                    "num_attention_heads",
                    "intermediate_size",
                    "max_position_embeddings",
                    "type_vocab_size",
                )
            },
            hidden_act="gelu_new",  # = the original's tanh gelu
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.0,
            **kw,
        )
        model = getattr(transformers, cls_name)(hf_cfg)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints every variable
            load_tf_weights_in_albert(model, hf_cfg, str(prefix))
        return {k: v.detach().numpy() for k, v in model.state_dict().items()}

    ids = np.array([[2, 17, 33, 5, 61, 8, 3], [2, 40, 9, 3, 12, 77, 3]], dtype=np.int32)
    types = np.array([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1]], dtype=np.int32)

    # --------------------------------------------------------------------------- a SentencePiece model
    import sentencepiece as spm

    spm_dir = out / "google"
    spm_dir.mkdir(parents=True, exist_ok=True)
    botchan = REPO / "data" / "botchan" / "botchan.txt"
    if not botchan.exists():
        sys.exit(f"{botchan} missing: run `python scripts/fetch_data.py` first")
    # ALBERT README spm_train flags, at a tiny vocabulary and without the NFKC table (smaller file)
    spm.SentencePieceTrainer.train(
        input=str(botchan),
        model_prefix=str(spm_dir / "30k-clean"),
        vocab_size=100,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols="[CLS],[SEP],[MASK]",
        normalization_rule_name="identity",
        num_threads=1,  # deterministic
        character_coverage=1.0,
        minloglevel=2,
    )
    (spm_dir / "30k-clean.vocab").unlink()

    # --------------------------------------------------------------------------- google (release tarball)
    cfg = {
        "attention_probs_dropout_prob": 0.0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "embedding_size": 8,
        "hidden_size": 16,
        "initializer_range": 0.02,
        "intermediate_size": 32,
        "max_position_embeddings": 16,
        "num_attention_heads": 2,
        "num_hidden_layers": 4,
        "num_hidden_groups": 2,
        "net_structure_type": 0,
        "gap_size": 0,
        "num_memory_blocks": 0,
        "inner_group_num": 2,
        "down_scale_factor": 1,
        "type_vocab_size": 2,
        "vocab_size": 100,
    }
    import json

    d = out / "google"
    (d / "albert_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    arrays = {**google_backbone(cfg), **pretraining_heads(cfg, cfg["embedding_size"])}
    full = with_slots(arrays, ("adam_m", "adam_v"))
    save_tf1(d / "model.ckpt-best", full)
    np.savez_compressed(d / "arrays.npz", **full)
    save_expected(d / "expected.npz", google_forward(arrays, cfg, ids, types), ids, types)
    np.savez(d / "hf.npz", **hf_convert(d / "model.ckpt-best", cfg, "AlbertForPreTraining"))

    # --------------------------------------------------------------------------- classifier (TF-Hub fine-tuned)
    d = out / "classifier"
    d.mkdir(parents=True, exist_ok=True)
    ccfg = dict(cfg, num_hidden_groups=1, inner_group_num=1, num_hidden_layers=3)
    (d / "albert_config.json").write_text(json.dumps(ccfg, indent=2) + "\n")
    shutil.copy(out / "google" / "30k-clean.model", d / "30k-clean.model")
    arrays = {f"module/{k}": v for k, v in google_backbone(ccfg).items()}
    arrays["output_weights"] = randn(3, ccfg["hidden_size"])
    arrays["output_bias"] = randn(3, scale=0.1)
    full = with_slots(arrays, ("adam_m", "adam_v"))
    save_tf1(d / "model.ckpt", full, two_devices=True, step=100)
    # The state file names the training machine's absolute path (gs://... on TPUs); keep that shape but not
    # this machine's path: the reader must find the checkpoint next to the state file.
    state = d / "checkpoint"
    state.write_text(state.read_text().replace(str(d.resolve()), "gs://albert-runs/glue/cola"))
    np.savez_compressed(d / "arrays.npz", **full)
    plain = {k.removeprefix("module/"): v for k, v in arrays.items()}
    save_expected(d / "expected.npz", google_forward(plain, ccfg, ids, types, classifier=True), ids, types)
    np.savez(
        d / "hf.npz",
        **hf_convert(d / "model.ckpt-100", ccfg, "AlbertForSequenceClassification", num_labels=3),
    )

    # --------------------------------------------------------------------------- brightmart albert_zh
    d = out / "brightmart"
    d.mkdir(parents=True, exist_ok=True)
    zh = [line.rstrip("\n") for line in (REPO / "data" / "zh_vocab" / "vocab.txt").open(encoding="utf-8")]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [t for t in zh if len(t) == 1 and "\u4e00" <= t <= "\u9fff"][:59]
    vocab = specials + chars
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    bcfg = {  # brightmart albert_config_tiny.json fields
        "attention_probs_dropout_prob": 0.0,
        "directionality": "bidi",
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": 16,
        "embedding_size": 8,
        "initializer_range": 0.02,
        "intermediate_size": 32,
        "max_position_embeddings": 16,
        "num_attention_heads": 2,
        "num_hidden_layers": 3,
        "pooler_fc_size": 16,
        "pooler_num_attention_heads": 2,
        "pooler_num_fc_layers": 3,
        "pooler_size_per_head": 8,
        "pooler_type": "first_token_transform",
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
        "ln_type": "postln",
    }
    (d / "albert_config_tiny.json").write_text(json.dumps(bcfg, indent=2) + "\n")
    V, E, H, F, P = len(vocab), 8, 16, 32, 16
    s = "bert/encoder/layer_shared/"
    arrays = {
        "bert/embeddings/word_embeddings": randn(V, E),
        "bert/embeddings/word_embeddings_2": randn(E, H),
        "bert/embeddings/position_embeddings": randn(P, H),
        "bert/embeddings/token_type_embeddings": randn(2, H),
        "bert/embeddings/LayerNorm/gamma": 1 + randn(H, scale=0.1),
        "bert/embeddings/LayerNorm/beta": randn(H, scale=0.1),
        "bert/pooler/dense/kernel": randn(H, H, scale=0.3),
        "bert/pooler/dense/bias": randn(H, scale=0.1),
        s + "attention/output/dense/kernel": randn(H, H, scale=0.3),
        s + "attention/output/dense/bias": randn(H, scale=0.1),
        s + "intermediate/dense/kernel": randn(H, F, scale=0.3),
        s + "intermediate/dense/bias": randn(F, scale=0.1),
        s + "output/dense/kernel": randn(F, H, scale=0.3),
        s + "output/dense/bias": randn(H, scale=0.1),
    }
    for n in ("query", "key", "value"):
        arrays[s + f"attention/self/{n}/kernel"] = randn(H, H, scale=0.3)
        arrays[s + f"attention/self/{n}/bias"] = randn(H, scale=0.1)
    for ln in ("attention/output/LayerNorm", "output/LayerNorm"):
        arrays[s + ln + "/gamma"] = 1 + randn(H, scale=0.1)
        arrays[s + ln + "/beta"] = randn(H, scale=0.1)
    arrays.update(pretraining_heads(dict(bcfg, vocab_size=V), H))  # brightmart: transform dense is H -> H
    full = with_slots(arrays, ("lamb_m", "lamb_v"))
    save_tf1(d / "albert_model.ckpt", full)
    np.savez_compressed(d / "arrays.npz", **full)
    save_expected(d / "expected.npz", brightmart_forward(arrays, bcfg, ids % V, types), ids % V, types)

    # --------------------------------------------------------------------------- dtypes (raw SaveV2)
    d = out / "dtypes"
    d.mkdir(parents=True, exist_ok=True)
    values = {
        "f32": tf.constant(randn(3, 5)),
        "f64": tf.constant(rng.standard_normal(4)),
        "f16": tf.constant(randn(2, 3).astype(np.float16)),
        "bf16": tf.constant([1.5, -2.25, 3.0e38, 1e-3], dtype=tf.bfloat16),
        "i8": tf.constant(np.array([-128, 0, 127], dtype=np.int8)),
        "u8": tf.constant(np.array([0, 255], dtype=np.uint8)),
        "i32": tf.constant(np.array([[-(2**31), 2**31 - 1]], dtype=np.int32)),
        "i64": tf.constant(np.array([-(2**63), 2**63 - 1], dtype=np.int64)),
        "bool": tf.constant([True, False, True]),
        "scalar": tf.constant(np.float32(3.25)),
        "empty": tf.zeros((0, 4)),
        "str": tf.constant([b"ALBERT", b"", "\u4e2d\u6587".encode()]),
    }
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=str(d / "model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[values[n] for n in names],
    )
    expected = {n: v.numpy() for n, v in values.items()}
    expected["bf16"] = tf.cast(values["bf16"], tf.float32).numpy()
    expected["str"] = np.array(expected["str"].tolist(), dtype="S")
    np.savez_compressed(d / "arrays.npz", **expected)

    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"TensorFlow {tf.__version__}: wrote {out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        if os.environ.get("ALBERT_TF_FIXTURE_CHILD"):
            raise
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--venv", default="/tmp/tfvenv")
        _bootstrap(Path(pre.parse_known_args()[0].venv))
    main()
