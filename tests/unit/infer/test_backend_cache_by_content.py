"""``--backend auto`` keys its remembered choice and its cached ONNX export by the content of the model's
weights and config.json (sha256), not by the weights file's path, size and mtime: new weights of the same
size with the old mtime (``cp --preserve``, ``touch -r``, a checkpoint restored from a backup) are another
model, with another export."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from albert_lm.infer import backend as B


def _same_size_same_mtime(model_dir: Path) -> None:
    """Rewrite the weights with other values of the same shapes, then put the old mtime back."""
    path = model_dir / "model.safetensors"
    st = path.stat()
    state = {k: v + 1.0 for k, v in load_file(str(path)).items()}
    save_file(state, str(path), metadata={"format": "pt"})
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def _model_dir(tmp_path: Path) -> Path:
    from albert_lm.config import PRESETS
    from albert_lm.model import AlbertForSequenceClassification

    d = tmp_path / "m"
    AlbertForSequenceClassification(
        PRESETS["albert-tiny"].replace(vocab_size=16), num_labels=2
    ).save_pretrained(d)
    return d


def test_new_weights_with_the_old_size_and_mtime_get_a_new_key_and_export_dir(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    key, export = B.cache_key(model_dir, False, 1, (1, 8)), B.export_cache_dir(model_dir)
    assert B.cache_key(model_dir, False, 1, (1, 8)) == key and B.export_cache_dir(model_dir) == export
    _same_size_same_mtime(model_dir)
    assert B.cache_key(model_dir, False, 1, (1, 8)) != key
    assert B.export_cache_dir(model_dir) != export


def test_a_changed_config_gets_a_new_key(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    key = B.cache_key(model_dir, False, 1, (1, 8))
    cfg = model_dir / "config.json"
    st = cfg.stat()
    cfg.write_text(cfg.read_text().replace('"LABEL_0"', '"LABEL_X"'))
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert B.cache_key(model_dir, False, 1, (1, 8)) != key


def test_the_same_content_elsewhere_hashes_the_same(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(model_dir, copy)
    assert B.content_key(model_dir) == B.content_key(copy)
    assert set(B.content_key(model_dir)) == {"model.safetensors", "config.json"}
