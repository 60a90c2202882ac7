"""Health of a pretraining run while it runs: the three ways such runs fail unnoticed for days.

People pretraining ALBERT on their own corpus report runs whose loss stops decreasing
(google-research/albert#29), whose MLM and SOP accuracies suddenly drop (kamalkraj/ALBERT-TF2.0#21) and
small models stuck from the start (albert_zh#135). Each has a signature that a run can watch for itself:

* **the unigram plateau**: masked-LM accuracy at the rate of the most frequent masked token after a
  quarter of the run -- the model predicts token frequencies whatever the context (this project's
  demo-zh did, and its encoder had collapsed: docs/chinese.md);
* **representation collapse**: the encoder's output hardly varies across inputs. Measured on a fixed
  batch of held-out sequences as the median over features of the standard deviation across sequences of
  the mean-pooled last layer, relative to the same figure at the start of the run;
* **a loss spike or divergence**: a logged training loss far above the recent ones, or not finite.

Each is logged once, as a warning that says what to try, and kept in ``RUN_DIR/health.json``. Only
watching: the run goes on (a non-finite step is already skipped by the trainer, `TrainerConfig.max_bad_steps`).

With ``run.spike_rollback`` the trainer acts on the spike rule (`LossSpikes`, the same one) and on non-finite
steps: it goes back to the last checkpoint written before the spike and skips the batches read since, as
PaLM did (Chowdhery et al. 2022, Sec. 5.1; `albert_lm.train.rollback`). Each rollback is an event here too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from albert_lm.train.spikes import SPIKE_WINDOW, LossSpikes

logger = logging.getLogger(__name__)

HEALTH_FILE = "health.json"
# the plateau: MLM accuracy under this multiple of the most frequent masked token's rate (pretraining.py's
# PLATEAU_RATIO; measured there), checked once the run is this far through its budget
PLATEAU_AFTER = 0.25
# collapse: the spread of the encoder's output across inputs under this share of its value at the start
# (demo-zh's collapsed encoder: 0.0034 / 0.032 ~ 0.1 on [CLS]; a healthy run's stays within ~0.5-2x)
COLLAPSE_RATIO = 0.2

# the plateau's first tip, left out of the advice of a run that already has it
UNIGRAM_BIAS_TIP = (
    "model.mlm_bias_init=unigram (the output bias starts at the label frequencies, so the encoder is not bent "
    "to learn them: it took the Chinese demo off this plateau); "
)
ADVICE = {
    "plateau": f"the model predicts token frequencies, not tokens in context. Try: {UNIGRAM_BIAS_TIP}train "
    "longer; a higher peak lr with warmup (the demo: AdamW 1e-3); a smaller batch for more updates; check that "
    "the masks are not degenerate (`albert data stats`). Fine-tuning from such a model can do worse than "
    "random init",
    "collapse": "the encoder gives (almost) the same vector for every input. Try: a lower peak lr or a "
    "longer warmup; fp32 instead of fp16; check the data for long runs of one token; resume from an earlier "
    "checkpoint",
    "spike": "the training loss jumped. Try: a lower peak lr or a longer warmup, a smaller "
    "optim.max_grad_norm; look at the batches just before this step; resume from the last checkpoint "
    "before it if the loss does not come back (run.spike_rollback=true does that by itself)",
    "diverged": "the training loss is not finite. Try: a lower peak lr, fp32 or bf16 instead of fp16; resume "
    "from the last checkpoint",
    "rollback": "the run went back to its last checkpoint before the spike and skipped the batches read since "
    "(run.spike_rollback). If spikes come back, lower the peak lr or lengthen the warmup",
}


def representation_spread(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> float:
    """Median over features of the standard deviation across sequences of the mean-pooled last layer of
    ``model``'s encoder (``model.albert`` or the model itself) on ``batch``; ~0 when every input gives
    the same vector."""
    encoder = getattr(model, "albert", model)
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            device = next(encoder.parameters()).device
            mask = batch["attention_mask"].to(device)
            out = encoder(
                batch["input_ids"].to(device),
                token_type_ids=batch["token_type_ids"].to(device),
                attention_mask=mask,
            )
            seq = out["sequence_output"].float()  # (B, T, H)
            m = mask.unsqueeze(-1).float()
            pooled = (seq * m).sum(1) / m.sum(1).clamp(min=1)  # (B, H)
            return float(pooled.std(0).median())
    finally:
        encoder.train(was_training)


class HealthMonitor:
    """Watches the training log and the evaluations of one run; see the module docstring.

    Args:
        most_frequent_rate: the rate of the most frequent masked token of the training data.
        plateau_ratio: accuracy under ``plateau_ratio * most_frequent_rate`` is the plateau.
        probe_batch: a fixed batch of held-out sequences for the spread (None: no collapse check).
        budget: a function giving how far through its budget the run is (0..1) from a training record.
        run_dir: where ``health.json`` goes (None: nowhere).
        unigram_bias: the run's masked-LM bias started at the unigram frequencies (``model.mlm_bias_init``),
            so the plateau's advice does not suggest it.
    """

    def __init__(
        self,
        most_frequent_rate: float,
        plateau_ratio: float,
        probe_batch: Mapping[str, torch.Tensor] | None,
        budget: Any,
        run_dir: str | Path | None = None,
        unigram_bias: bool = False,
    ) -> None:
        self.unigram_bias = unigram_bias
        self.most_frequent_rate = most_frequent_rate
        self.plateau_ratio = plateau_ratio
        self.probe_batch = probe_batch
        self.budget = budget
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.reference_spread: float | None = None
        self.events: list[dict[str, Any]] = []
        self._spikes = LossSpikes()
        self._progress = 0.0

    # -------------------------------------------------------------------------------- the hooks
    def start(self, model: nn.Module) -> None:
        """The reference spread, at the start of the run (or of its resumption)."""
        if self.probe_batch is not None:
            self.reference_spread = representation_spread(model, self.probe_batch)
            logger.info("health: representation spread at the start %.4g", self.reference_spread)

    def on_train_record(self, record: Mapping[str, Any]) -> None:
        """A training record of the trainer's ``on_log``, or its record of a rollback."""
        step = int(record.get("step", 0))
        if "rollback_from_step" in record:
            self._rollback(record)
            return
        self._progress = float(self.budget(record))
        loss = float(record.get("loss", math.nan))
        if not math.isfinite(loss):
            self._event("diverged", step, f"training loss {loss} at step {step}")
            return
        median = self._spikes.check(loss)
        if median is not None:
            self._event("spike", step, f"training loss {loss:.3f} at step {step}, {loss / median:.1f}x the "
                        f"median of the last {SPIKE_WINDOW} logged ({median:.3f})")  # fmt: skip
        if "mlm_accuracy" in record:
            self._check_plateau(step, float(record["mlm_accuracy"]), "training")

    def on_eval(self, step: int, metrics: Mapping[str, float], model: nn.Module) -> dict[str, float]:
        """Checks after an evaluation; returns the metrics to log with it (the spread)."""
        out: dict[str, float] = {}
        if "eval_mlm_accuracy" in metrics:
            self._check_plateau(step, float(metrics["eval_mlm_accuracy"]), "held-out")
        if self.probe_batch is not None:
            spread = representation_spread(model, self.probe_batch)
            out["eval_representation_spread"] = spread
            ref = self.reference_spread
            if ref is not None and ref > 0 and spread < COLLAPSE_RATIO * ref:
                self._event("collapse", step, f"representation spread {spread:.3g} at step {step}, "
                            f"{spread / ref:.2f}x its value at the start ({ref:.3g})")  # fmt: skip
        return out

    # -------------------------------------------------------------------------------- checks
    def _check_plateau(self, step: int, accuracy: float, which: str) -> None:
        if self._progress < PLATEAU_AFTER or not math.isfinite(accuracy):
            return
        if accuracy < self.plateau_ratio * self.most_frequent_rate:
            self._event("plateau", step, f"{which} masked-LM accuracy {accuracy:.1%} at step {step} "
                        f"({self._progress:.0%} of the budget) is at the rate of the most frequent masked "
                        f"token ({self.most_frequent_rate:.1%})")  # fmt: skip

    def _rollback(self, record: Mapping[str, Any]) -> None:
        """Every rollback is an event (`albert_lm.train.rollback`): where from, where to, what was skipped."""
        frm, to = int(record["rollback_from_step"]), int(record["step"])
        what = (f"rolled back from step {frm} to step {to} ({record.get('rollback_reason', 'loss spike')}), "
                f"{int(record.get('rollback_skipped_batches', 0))} batches skipped")  # fmt: skip
        self.events.append({"kind": "rollback", "step": frm, "what": what, "advice": ADVICE["rollback"]})
        self.write()  # not logged: the trainer's warning said it

    def _event(self, kind: str, step: int, what: str) -> None:
        if any(e["kind"] == kind for e in self.events):
            return  # once per kind
        advice = ADVICE[kind]
        if kind == "plateau" and self.unigram_bias:
            advice = advice.replace(UNIGRAM_BIAS_TIP, "")
        self.events.append({"kind": kind, "step": step, "what": what, "advice": advice})
        logger.warning("health: %s: %s", what, advice)
        self.write()

    def write(self) -> None:
        if self.run_dir is None:
            return
        from albert_lm._io import atomic_write_json

        atomic_write_json(
            self.run_dir / HEALTH_FILE,
            {"reference_spread": self.reference_spread, "events": self.events},
            indent=2,
        )
