#!/usr/bin/env python3
"""SQuAD on real data and real weights: our span head vs transformers' BertForQuestionAnswering, and
ALBERT's SQuAD 2.0 answer-verifier head on a SQuAD-2.0-style set. One run, side by side.

Data: the real SQuAD v1.1 dev set (data/squad/dev-v1.1.json, 48 articles), split by article in file
order: the first 36 articles train, the last 12 evaluate (`albert_lm.tasks.squad.split_articles`); no
paragraph is on both sides. ``--train-questions`` / ``--eval-questions`` take a seeded sample of each side
(CPU budget); training uses the first gold answer, evaluation scores against all of them.

Weights: all-MiniLM-L6-v2 (data/minilm: BertModel, 6 layers, hidden 384), a new span head.

1. span, ours: `albert_lm.model.AlbertForQuestionAnswering.from_pretrained(data/minilm)`;
2. span, reference: `transformers.BertForQuestionAnswering.from_pretrained(data/minilm)`;

trained *identically*: the same features (our featurization: windows, labels), the same batches in the
same order (`LengthGroupedBatches`, one seed), the same trainer (`albert_lm.train.Trainer.for_finetuning`:
AdamW with weight decay 0.01 off LayerNorm and biases, linear warmup and decay, clipping 1.0), the same
initial head (the reference's freshly initialized ``qa_outputs`` is copied into ours) and the same
post-processing and official metric. With ``--dropout 0`` (default) both runs are deterministic, so any
gap comes from the implementations' arithmetic; ``--dropout 0.1`` (the checkpoint's own) adds dropout,
whose random masks differ between the two models.

3. SQuAD-2.0-style (``--v2``): both sides of the split get a third of their questions moved to a
   paragraph of another article of the same side, marked unanswerable (`make_unanswerable`); ALBERT's
   answer-verifier head (`albert_lm.model.squad_head.AlbertForSquadV2`) is trained on the train side and
   evaluated on the other, reporting HasAns / NoAns and the best-F1 threshold (chosen on that set, as
   the original's evaluate_v2).

Measured here (2 shared CPU cores, load average 5-9 from other jobs; 480 train questions = 711 windows,
240 eval questions, max_seq_length 192, doc_stride 64, batch 16, dropout 0, seed 42):

    --epochs 3 --lr 2e-4 (135 steps)  ours EM 17.08 F1 29.85 | transformers EM 17.08 F1 29.86 (-0.01 points)
                                      train 826 s vs 895 s (0.92x), eval 27 s vs 35 s
    --epochs 1 --lr 1e-4 (45 steps)   ours EM 3.33 F1 9.69   | transformers EM 3.33 F1 9.69 (0.00)
                                      train 525 s vs 577 s (0.91x), eval 63 s vs 44 s (noisy machine)
    verifier head, 2.0-style, 3 epochs: exact 48.33 F1 57.28; HasAns EM 20.26 F1 34.30 (153 questions);
                                      NoAns 97.70 (87); threshold 0.44 chosen on that set; train 1040 s
    (the 1-epoch verifier run had not learned spans yet: HasAns F1 1.26, NoAns 98.85, F1 36.64)

Wall time of the whole script here: 51 min (3 epochs), 35 min (1 epoch).

    python benchmarks/bench_squad.py --epochs 3 --lr 2e-4  # the run above (~50 min on 2 busy CPU cores)
    python benchmarks/bench_squad.py                        # 1 epoch, lr 1e-4 (~35 min)
    python benchmarks/bench_squad.py --train-questions 0 --eval-questions 0 --max-seq-length 384 \\
        --epochs 2 --device cuda                           # all 36 / 12 articles (GPU)
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SQUAD = REPO / "data" / "squad" / "dev-v1.1.json"
MINILM = REPO / "data" / "minilm"


class HFSpanAdapter:
    """Make transformers' BertForQuestionAnswering look like our models to the trainer: forward(**batch)
    -> dict with loss, start_logits, end_logits (extra batch keys such as p_mask are ignored)."""

    @staticmethod
    def wrap(model: Any) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, token_type_ids=None, attention_mask=None, start_positions=None,
                        end_positions=None, **_: Any) -> dict[str, Any]:  # fmt: skip
                out = self.inner(
                    input_ids=input_ids,
                    token_type_ids=token_type_ids,
                    attention_mask=attention_mask,
                    start_positions=start_positions,
                    end_positions=end_positions,
                )
                res = {"start_logits": out.start_logits.float(), "end_logits": out.end_logits.float()}
                if out.loss is not None:
                    res["loss"] = out.loss
                return res

        return Wrapped(model)


def _sample(data: list[dict], n: int, seed: int) -> list[dict]:
    """Keep a seeded sample of ``n`` questions (0: all), in the file's layout."""
    if n <= 0:
        return data
    ids = [qa["id"] for a in data for p in a["paragraphs"] for qa in p["qas"]]
    keep = set(random.Random(seed).sample(ids, min(n, len(ids))))
    out = []
    for a in data:
        paras = []
        for p in a["paragraphs"]:
            qas = [qa for qa in p["qas"] if qa["id"] in keep]
            if qas:
                paras.append({"context": p["context"], "qas": qas})
        if paras:
            out.append({"title": a.get("title", ""), "paragraphs": paras})
    return out


def _train(model: Any, features: list, task: Any, args: argparse.Namespace, run_dir: Path) -> float:
    """One training run through the project's trainer; returns seconds."""
    import torch

    from albert_lm.tasks.collate import LengthGroupedBatches
    from albert_lm.train import OptimSettings, Trainer, TrainerConfig

    batches = LengthGroupedBatches(features, args.batch_size, task.collate, seed=args.seed)
    steps = max(1, round(args.epochs * len(batches)))
    torch.manual_seed(args.seed)  # dropout masks
    trainer = Trainer.for_finetuning(
        model,
        optim=OptimSettings(optimizer="adamw", learning_rate=args.lr, weight_decay=0.01),
        total_steps=steps,
        warmup_steps=int(0.1 * steps),
        config=TrainerConfig(
            precision="fp32",
            max_steps=steps,
            device=args.device,
            eval_at_end=False,
            save_at_end=False,
            log_every=max(1, steps // 10),
            progress=False,
        ),
        run_dir=run_dir,
    )
    t0 = time.perf_counter()
    trainer.fit(batches)
    return time.perf_counter() - t0


def _evaluate(
    model: Any, task: Any, examples: list, features: list, args: argparse.Namespace
) -> tuple[dict, float]:
    from albert_lm.tasks.evaluate import evaluate, model_predict_fn

    t0 = time.perf_counter()
    res = evaluate(task, examples, features, model_predict_fn(model), batch_size=args.eval_batch_size)
    return res.metrics, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--train-questions",
        type=int,
        default=640,
        help="questions sampled from the 36 train articles (0: all)",
    )
    ap.add_argument(
        "--eval-questions", type=int, default=300, help="questions sampled from the 12 eval articles (0: all)"
    )
    ap.add_argument("--max-seq-length", type=int, default=192)
    ap.add_argument("--doc-stride", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--eval-batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--dropout", type=float, default=0.0, help="hidden and attention dropout of both models")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument(
        "--v2", action=argparse.BooleanOptionalAction, default=True, help="also the SQuAD-2.0-style run"
    )
    ap.add_argument("--skip-span", action="store_true", help="only the SQuAD-2.0-style run")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if not SQUAD.exists() or not MINILM.exists():
        print(
            "data missing: run `python scripts/fetch_data.py` and `python scripts/fetch_data.py squad`",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")

    import torch
    from transformers import BertForQuestionAnswering

    from albert_lm.model import AlbertForQuestionAnswering
    from albert_lm.model.squad_head import AlbertForSquadV2
    from albert_lm.tasks.squad import SquadTask, make_unanswerable, split_articles
    from albert_lm.tokenizer import load_tokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    raw = json.loads(SQUAD.read_text(encoding="utf-8"))["data"]
    train_raw, eval_raw = split_articles(raw, 36 / 48)
    train_raw = _sample(train_raw, args.train_questions, args.seed)
    eval_raw = _sample(eval_raw, args.eval_questions, args.seed + 1)
    tok = load_tokenizer(MINILM)
    results: dict[str, Any] = {
        "config": vars(args) | {"json": str(args.json)},
        "torch_threads": torch.get_num_threads(),
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench_squad_"))

    def files(name: str, version: str, train: list, evaluation: list) -> dict[str, Path]:
        out = {}
        for split, data in (("train", train), ("dev", evaluation)):
            path = tmp / f"{name}-{split}.json"
            path.write_text(json.dumps({"version": version, "data": data}), encoding="utf-8")
            out[split] = path
        return out

    def prepare(task: SquadTask) -> tuple[list, list, list]:
        train_ex = task.read("train")
        eval_ex = task.read("dev")
        train_f = task.featurize(train_ex, tok, args.max_seq_length)
        eval_f = task.featurize(eval_ex, tok, args.max_seq_length)
        return train_f, eval_ex, eval_f

    drop = {"hidden_dropout_prob": args.dropout, "attention_probs_dropout_prob": args.dropout}
    if not args.skip_span:
        task = SquadTask("1.1", files("v11", "1.1", train_raw, eval_raw), doc_stride=args.doc_stride)
        train_f, eval_ex, eval_f = prepare(task)
        print(f"SQuAD 1.1 span head: {len(train_f)} train windows ({task.reports['train'].examples} questions, "
              f"36 articles), {len(eval_ex)} eval questions ({len(eval_f)} windows, 12 other articles)")  # fmt: skip
        torch.manual_seed(args.seed)
        ref = BertForQuestionAnswering.from_pretrained(MINILM, **drop)
        ours = AlbertForQuestionAnswering.from_pretrained(MINILM, **drop)
        with torch.no_grad():  # the same fresh head on both sides
            ours.qa.weight.copy_(ref.qa_outputs.weight)
            ours.qa.bias.copy_(ref.qa_outputs.bias)
        rows = {}
        for name, model in (
            ("ours (AlbertForQuestionAnswering)", ours),
            ("transformers BertForQuestionAnswering", HFSpanAdapter.wrap(ref)),
        ):
            t_train = _train(model, train_f, task, args, tmp / name.split()[0])
            metrics, t_eval = _evaluate(model, task, eval_ex, eval_f, args)
            rows[name] = {**metrics, "train_s": t_train, "eval_s": t_eval}
            print(f"  {name:40s} EM {metrics['exact_match']:6.2f}  F1 {metrics['f1']:6.2f}  "
                  f"train {t_train:7.1f} s  eval {t_eval:6.1f} s", flush=True)  # fmt: skip
        a, b = rows.values()
        print(f"  F1 difference (ours - reference): {a['f1'] - b['f1']:+.2f} points; "
              f"time ratio ours/reference: train {a['train_s'] / b['train_s']:.2f}, eval {a['eval_s'] / b['eval_s']:.2f}")  # fmt: skip
        results["span"] = rows

    if args.v2:
        frac = 1 / 3
        task2 = SquadTask(
            "2.0",
            files("v2", "v2.0", make_unanswerable(train_raw, frac, seed=args.seed), make_unanswerable(eval_raw, frac, seed=args.seed + 1)),
            head="verifier",
            doc_stride=args.doc_stride,
        )  # fmt: skip
        train_f, eval_ex, eval_f = prepare(task2)
        n_no = sum(1 for e in eval_ex if not e.label)
        print(f"SQuAD-2.0-style, ALBERT's answer-verifier head: {len(train_f)} train windows, {len(eval_ex)} eval "
              f"questions ({n_no} unanswerable)")  # fmt: skip
        torch.manual_seed(args.seed)
        v2 = AlbertForSquadV2.from_pretrained(MINILM, **drop)
        t_train = _train(v2, train_f, task2, args, tmp / "v2")
        metrics, t_eval = _evaluate(v2, task2, eval_ex, eval_f, args)
        results["v2_verifier"] = {**metrics, "train_s": t_train, "eval_s": t_eval}
        keys = (
            "exact",
            "f1",
            "HasAns_exact",
            "HasAns_f1",
            "NoAns_exact",
            "NoAns_f1",
            "best_f1",
            "null_threshold",
        )
        print("  " + "  ".join(f"{k} {metrics[k]:.2f}" for k in keys))
        print(
            f"  (threshold chosen on the evaluated set for best F1)  train {t_train:.1f} s  eval {t_eval:.1f} s"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
