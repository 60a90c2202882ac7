"""A toy model and a resumable synthetic batch stream for the trainer tests (unit and e2e).

`Toy` is a linear regression with dropout (so the RNG state matters); `Stream` yields batches drawn from a
generator seeded by (seed, position), and reports its position through state_dict / load_state_dict, as
the pretraining dataset does. `main` is a command-line run used by the e2e tests (resume, torchrun).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator

import torch
from torch import nn

W_TRUE = torch.tensor([1.0, -2.0, 0.5, 3.0])


class Toy(nn.Module):
    def __init__(self, dropout: float = 0.0, hidden: int = 8) -> None:
        super().__init__()
        self.up = nn.Linear(4, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)
        self.down = nn.Linear(hidden, 1)
        self.seen_dtype: torch.dtype | None = None
        self.gradient_checkpointing = False

    def forward(self, x: torch.Tensor, y: torch.Tensor, poison: torch.Tensor | None = None) -> dict:
        h = self.up(x)
        self.seen_dtype = h.dtype
        pred = self.down(self.drop(torch.tanh(self.norm(h)))).squeeze(-1).float()
        loss = ((pred - y) ** 2).mean()
        if poison is not None and bool(poison.any()):
            loss = loss * float("nan")  # a poisoned batch: NaN loss and NaN gradients
        return {"loss": loss, "abs_err": (pred - y).abs().mean().detach(), "logits": pred}


class Stream:
    """Endless (or ``n_batches``-long) batches; position-addressed so that it can resume exactly."""

    def __init__(
        self,
        batch_size: int = 8,
        seed: int = 0,
        n_batches: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        poison_at: tuple[int, ...] = (),
        spike_at: tuple[int, ...] = (),
    ) -> None:
        self.batch_size, self.seed, self.n_batches = batch_size, seed, n_batches
        self.rank, self.world_size = rank, world_size
        self.poison_at = set(poison_at)
        self.spike_at = set(spike_at)  # batches whose targets are 30x too large: a finite loss spike
        self.pos = 0  # batches consumed by this rank

    def batch_at(self, index: int) -> dict[str, torch.Tensor]:
        """Global batch ``index`` (rank r of w reads indices r, r + w, r + 2w, ...)."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x = torch.randn(self.batch_size, 4, generator=g)
        y = x @ W_TRUE + 0.01 * torch.randn(self.batch_size, generator=g)
        if index in self.spike_at:
            y = 30 * y
        poison = torch.full((self.batch_size,), index in self.poison_at)
        return {"x": x, "y": y, "poison": poison}

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        while self.n_batches is None or self.pos < self.n_batches:
            index = self.pos * self.world_size + self.rank
            self.pos += 1
            yield self.batch_at(index)

    def state_dict(self) -> dict[str, int]:
        return {"pos": self.pos}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.pos = state["pos"]


def main(argv: list[str] | None = None) -> int:
    """Train Toy with LAMB; used by tests/e2e (SIGKILL + resume, torchrun vs one process)."""
    from albert_lm.optim import build_optimizer, build_scheduler
    from albert_lm.train import Trainer, TrainerConfig
    from albert_lm.train.distributed import exit_process, init_distributed

    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--save-every", type=int, default=None)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds per batch (to kill mid-run)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--poison-at", default="", help="global batch indices with a NaN loss, comma-separated")
    p.add_argument("--spike-rollback", action="store_true")
    args = p.parse_args(argv)

    info = init_distributed("cpu")
    torch.manual_seed(1234)
    model = Toy(dropout=args.dropout, hidden=16)
    opt = build_optimizer(model, "lamb", lr=0.05)
    sched = build_scheduler(opt, total_steps=args.steps, warmup_steps=3)
    poison = tuple(int(i) for i in args.poison_at.split(",") if i)
    stream = Stream(args.micro_batch, 7, rank=info.rank, world_size=info.world_size, poison_at=poison)

    def slow() -> Iterator[dict[str, torch.Tensor]]:
        import time

        for b in stream:
            if args.step_sleep:
                time.sleep(args.step_sleep)
            yield b

    cfg = TrainerConfig(
        precision="fp32",
        max_steps=args.steps,
        grad_accum_steps=args.accum,
        log_every=1,
        save_every=args.save_every,
        keep_last=2,
        progress=False,
        spike_rollback=args.spike_rollback,
    )
    trainer = Trainer(model, opt, sched, cfg, run_dir=args.run_dir, data_state=stream, dist=info)
    result = trainer.fit(slow(), resume=args.resume)
    if info.is_main:
        print(json.dumps({"steps": result.steps, "loss": result.train_metrics.get("loss", math.nan)}))
    return exit_process(0)  # torchrun: every rank ends here, flushed, without finalization


if __name__ == "__main__":
    sys.exit(main())
