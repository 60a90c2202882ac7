#!/usr/bin/env python
"""Converting an albert-base-sized TF1 checkpoint: time and peak memory, ours next to transformers'.

    python benchmarks/bench_convert.py [--preset albert-base-v2] [--no-slots] [--tf-python /tmp/tfvenv/bin/python]

1. Writes a checkpoint with the released variable names and shapes of ``--preset`` (random weights, plus
   the ``adam_m``/``adam_v`` slots and ``global_step`` that the release checkpoints carry) into a
   temporary directory, with `albert_lm.convert.tf_checkpoint.write_checkpoint`.
2. Each converter runs in its own fresh process, timed from after its imports to a written model
   directory; memory is that process's peak RSS (``VmHWM``, reset after the imports) minus its RSS then:
   * ours: ``albert_lm.convert.tf.convert_tf_checkpoint`` (reads, verifies every CRC32C, maps, saves);
   * reference (when ``--tf-python`` has TensorFlow, torch and transformers, e.g. the venv that
     scripts/make_tf_fixture.py makes): transformers' ``load_tf_weights_in_albert`` into a freshly built
     ``AlbertForPreTraining``, then ``save_pretrained``;
   * the raw reader alone (every tensor read and checksummed), for its throughput.

Peak memory is compared with one copy of the converted weights (float32 bytes of the model's parameters).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

CHILD_PRELUDE = """
import json, os, sys, time
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
def peak():
    # VmHWM: this process's peak RSS (unlike ru_maxrss it is not inherited from the forking parent)
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith('VmHWM:'))
def start():
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')  # reset VmHWM to the current RSS: the imports' own peak does not count
    return rss()
def done(t0, base, **extra):
    print(json.dumps(dict(seconds=time.perf_counter() - t0, base=base, peak=peak(), **extra)))
"""

OURS = """
import logging
import albert_lm.convert.hf, albert_lm.model, safetensors.torch  # noqa: imported before the clock, as the reference's
from albert_lm.convert.tf import convert_tf_checkpoint
from albert_lm.model import HEADS
logging.disable(logging.WARNING)
prefix, config, out = sys.argv[1:4]
base = start(); t0 = time.perf_counter()
convert_tf_checkpoint(prefix, out, HEADS, config=config)
done(t0, base)
"""

READER = """
from albert_lm.convert.tf_checkpoint import TFCheckpoint
prefix = sys.argv[1]
base = start(); t0 = time.perf_counter()
total = 0
with TFCheckpoint(prefix) as ckpt:
    for name in ckpt:
        total += ckpt.read(name).nbytes
done(t0, base, bytes=total)
"""

REFERENCE = """
import contextlib, io, logging, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow  # noqa: F401
import transformers
from transformers.models.albert.modeling_albert import load_tf_weights_in_albert
logging.disable(logging.WARNING)
prefix, config, out = sys.argv[1:4]
cfg = json.load(open(config))
base = start(); t0 = time.perf_counter()
hf_cfg = transformers.AlbertConfig(**{k: v for k, v in cfg.items() if k != "hidden_act"}, hidden_act="gelu_new")
model = transformers.AlbertForPreTraining(hf_cfg)
with contextlib.redirect_stdout(io.StringIO()):
    load_tf_weights_in_albert(model, hf_cfg, prefix)
model.save_pretrained(out)
done(t0, base)
"""


def albert_variables(config: Any, slots: bool, seed: int = 0) -> dict[str, np.ndarray]:
    """The released variables of an ALBERT pretraining checkpoint for ``config``: names from the converter's
    TF table (albert_lm.convert.keymap.tf_rules), shapes in TF's layout (kernels (in, out), q/k/v separate)."""
    import torch

    from albert_lm.convert.keymap import tf_rules
    from albert_lm.convert.tf import _NoInit
    from albert_lm.model import AlbertForPreTraining

    with torch.device("meta"), _NoInit():
        shapes_ours = {k: tuple(v.shape) for k, v in AlbertForPreTraining(config).state_dict().items()}
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for rule in tf_rules(config, "google", "pretraining", bare=False):
        part = (shapes_ours[rule.ours][0] // len(rule.theirs), *shapes_ours[rule.ours][1:])
        for name in rule.theirs:
            shape = part[::-1] if name.endswith("/kernel") else part
            out[name] = rng.standard_normal(shape, dtype=np.float32) * 0.02
            if slots:  # AdamWeightDecayOptimizer's slots, as in the release checkpoints
                out[name + "/adam_m"] = rng.standard_normal(shape, dtype=np.float32) * 1e-3
                out[name + "/adam_v"] = np.abs(rng.standard_normal(shape, dtype=np.float32)) * 1e-6
    out["global_step"] = np.array(125000, dtype=np.int64)
    return out


def run_child(python: str, code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent / "src"))
    proc = subprocess.run(
        [python, "-c", CHILD_PRELUDE + code, *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="albert-base-v2")
    parser.add_argument("--no-slots", action="store_true", help="no adam_m/adam_v slots in the checkpoint")
    parser.add_argument(
        "--tf-python", default="/tmp/tfvenv/bin/python", help="python with TensorFlow (reference)"
    )
    parser.add_argument("--workdir", default=None, help="where to write the checkpoint (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per converter (best time, max memory)")
    args = parser.parse_args()

    from albert_lm.config import AlbertConfig
    from albert_lm.convert.tf_checkpoint import write_checkpoint

    config = AlbertConfig.from_preset(args.preset)
    cfg = {
        k: getattr(config, k)
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
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "initializer_range",
        )
    }
    cfg["hidden_act"] = "gelu"  # the released configs' name for the tanh approximation

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        variables = albert_variables(config, slots=not args.no_slots)
        weights = sum(v.nbytes for k, v in variables.items() if "adam_" not in k and k != "global_step")
        prefix = write_checkpoint(work / "albert" / "model.ckpt-best", variables, block_size=262144)
        del variables
        (work / "albert" / "albert_config.json").write_text(json.dumps(cfg))
        file_bytes = sum(p.stat().st_size for p in (work / "albert").glob("model.ckpt-best.*"))
        config_path = str(work / "albert" / "albert_config.json")

        def best(python: str, code: str, *a: str) -> dict:
            runs = [run_child(python, code, *a) for _ in range(args.repeat)]
            return {
                "seconds": min(r["seconds"] for r in runs),
                "extra": max(r["peak"] - r["base"] for r in runs),
                "peak": max(r["peak"] for r in runs),
            }

        reader = best(sys.executable, READER, str(prefix))
        ours = best(sys.executable, OURS, str(prefix), config_path, str(work / "ours"))
        ref = None
        if args.tf_python and Path(args.tf_python).exists():
            try:
                ref = best(args.tf_python, REFERENCE, str(prefix), config_path, str(work / "ref"))
            except RuntimeError as e:
                print(f"reference skipped: {e}", file=sys.stderr)

    mb = 1e6
    print(
        f"{args.preset}: {weights / 4 / 1e6:.1f}M parameters = {weights / mb:.1f} MB float32 weights; "
        f"checkpoint {file_bytes / mb:.1f} MB ({'with' if not args.no_slots else 'without'} Adam slots)"
    )
    print(
        f"reader alone: {reader['seconds']:.2f} s for {file_bytes / mb:.0f} MB "
        f"({file_bytes / mb / reader['seconds']:.0f} MB/s, every CRC32C verified)"
    )
    header = f"{'':34}{'ours':>12}"
    if ref:
        header += f"{'transformers+TF':>18}{'ratio':>9}"
    print(header)

    def row(label: str, key: str, scale: float, fmt: str) -> None:
        line = f"{label:34}{format(ours[key] / scale, fmt):>12}"
        if ref:
            line += f"{format(ref[key] / scale, fmt):>18}{ref[key] / ours[key]:>8.1f}x"
        print(line)

    row("conversion time (s)", "seconds", 1, ".2f")
    row("peak RSS over post-import (MB)", "extra", mb, ".0f")
    row("  ... in copies of the weights", "extra", weights, ".2f")
    row("peak RSS total (MB)", "peak", mb, ".0f")
    load = os.getloadavg()[0]
    print(
        f"({os.cpu_count()} CPUs, load average {load:.1f} during the run; times are wall-clock, best of {args.repeat})"
    )
    if not ref:
        print(f"(no reference: {args.tf_python} missing; make it with scripts/make_tf_fixture.py)")


if __name__ == "__main__":
    main()
