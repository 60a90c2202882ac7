"""`Predictor`: a fine-tuned model ready to label batches of inputs, with the backend of your choice.

One object for `albert serve` (each micro-batch of concurrent requests is one `Predictor.rows` call) and
`albert predict` (each chunk of input lines is one call):

    predictor = Predictor.load("RUN_DIR", backend="onnx", int8=True, threads=2)
    examples = predictor.examples([{"_texts": ["a gorgeous, witty film"]}, {"text": "a mess"}])
    rows = predictor.rows(examples)            # one output row per example, in order

* the task is rebuilt from the model directory's task.json (`albert_lm.finetune.rundir.load_finetuned`), so
  inputs, labels, thresholds and output rows are exactly those of `albert predict` / `albert evaluate`;
* a batch is featurized at once (`albert_lm.infer.runners.featurize`: one tokenizer call for
  classification), run in length-sorted sub-batches of at most ``batch_size`` and put back in input order.
  The torch backend skips padding (`albert_lm.runtime.attention.skip_padding`: a call costs its real tokens), so
  its sub-batches are full; ONNX Runtime runs the padded graph, so its sub-batches are cut where padding
  and calls cost least (`albert_lm.tasks.evaluate.predict`, ``CALL_COST_TOKENS``);
* backends: ``torch`` (fp32, or ``int8``: torch.ao dynamic int8 Linear layers) and ``onnx`` (ONNX
  Runtime on ``model.onnx`` / ``model.int8.onnx`` of an `albert export onnx` directory; a model
  directory without them is exported to a temporary directory at load time).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_lm.finetune.rundir import FineTuned, load_finetuned
from albert_lm.infer.backend import auto_predict_fn, onnx_session
from albert_lm.infer.runners import featurize, load_torch_model, ort_predict_fn, torch_predict_fn
from albert_lm.infer.settings import BACKENDS
from albert_lm.tasks.base import Example, ModelDirError, PredictFn
from albert_lm.tasks.evaluate import predict as run_batches
from albert_lm.tasks.inputs import pad_id_of

logger = logging.getLogger(__name__)

CALL_COST_TOKENS = 32
"""What a model call costs beyond its tokens, in tokens: the batches are cut where that is cheapest
(`albert_lm.tasks.collate.cheapest_batches`). albert-base in fp32 on a CPU (one thread, beside another job): a call of
one 32-token row took about what 45 tokens took in calls of 4 x 32 or more, where the time per token is level."""


class Predictor:
    """A fine-tuned model, its task and tokenizer, and a predict function (see the module docstring).

    Not thread-safe: one batch at a time (the server runs it in one worker thread).
    """

    def __init__(
        self,
        finetuned: FineTuned,
        predict_fn: PredictFn,
        *,
        backend: str = "torch",
        int8: bool = False,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        self.finetuned = finetuned
        self.predict_fn = predict_fn
        self.backend = backend
        self.int8 = int8
        self.batch_size = batch_size
        self.threads = threads

    # --------------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        backend: str = "torch",
        int8: bool = False,
        checkpoint: str = "best",
        threads: int | None = None,
        max_seq_length: int | None = None,
        batch_size: int = 32,
        device: str | None = None,
    ) -> Predictor:
        """A run directory's checkpoint, a fine-tuned model directory, or an `albert export onnx` directory.

        Args:
            backend: ``torch``, ``onnx`` or ``auto`` (the faster of the two on this CPU that gives the
                model's answers: `albert_lm.infer.backend`).
            int8: int8 weights (torch: dynamic quantization at load time, CPU only; onnx:
                ``model.int8.onnx``).
            threads: intra-op threads of the backend (torch.set_num_threads / ONNX Runtime); None: the
                library's default.
            max_seq_length: default: the length the model was fine-tuned with.
            device: torch backend only; default: the CPU.

        Raises:
            ModelDirError: not a fine-tuned model, no weights for the backend, or a bad argument.
        """
        if backend not in BACKENDS:
            raise ModelDirError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        finetuned = load_finetuned(path, checkpoint, max_seq_length)
        if backend == "auto":  # the fastest that gives the model's answers, measured once
            backend, predict_fn = auto_predict_fn(finetuned, int8=int8, threads=threads, device=device)
        elif backend == "onnx":
            predict_fn = ort_predict_fn(onnx_session(finetuned.model_dir, int8, threads))
        else:
            predict_fn = torch_predict_fn(load_torch_model(finetuned, int8, threads, device))
        logger.info(
            "%s (%s, %s%s) from %s", finetuned.info.get("task"), finetuned.task.kind, backend,
            " int8" if int8 else "", finetuned.model_dir,
        )  # fmt: skip
        return cls(finetuned, predict_fn, backend=backend, int8=int8, batch_size=batch_size, threads=threads)

    # ------------------------------------------------------------------------------------ what it is
    @property
    def task(self) -> Any:
        return self.finetuned.task

    @property
    def max_seq_length(self) -> int:
        return self.finetuned.max_seq_length

    def describe(self) -> dict[str, Any]:
        """Model, task, labels, input kind and sequence length (what `albert serve` shows at /info)."""
        info = self.finetuned.info
        return {
            "model_dir": str(self.finetuned.model_dir),
            "task": info.get("task"),
            "kind": self.task.kind,
            "labels": info.get("labels"),
            "text_fields": info.get("text_fields"),
            "max_seq_length": self.max_seq_length,
            "backend": self.backend,
            "int8": self.int8,
        }

    # ------------------------------------------------------------------------------------ predicting
    def examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int] | None = None,
        source: str = "input",
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """Examples of ``records`` (`albert predict`'s inputs: ``{"_texts": [text, ...]}`` for a text
        line split at tabs, or a JSON object); raises `albert_lm.tasks.base.TaskDataError` naming
        ``source:number`` for a record the task cannot use."""
        numbers = list(numbers) if numbers is not None else list(range(1, len(records) + 1))
        return self.task.predict_examples(
            records, numbers, source, text_field=text_field, pair_field=pair_field
        )

    def predict(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        """The task's prediction records of ``examples``, in order."""
        if not examples:
            return []
        tokenizer = self.finetuned.tokenizer
        features = featurize(self.task, examples, tokenizer, self.max_seq_length, num_workers=self.threads)
        outputs = run_batches(
            self.task,
            features,
            self.predict_fn,
            batch_size=self.batch_size,
            pad_id=pad_id_of(tokenizer),
            # torch skips padding: one full call beats length-cut ones (their few rows run the GEMMs slower)
            call_cost_tokens=None if self.backend == "torch" else CALL_COST_TOKENS,
        )
        return self.task.postprocess(outputs, examples, features)

    def rows(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        """One output row per example (`Task.output_row`: what `albert predict` writes), in order."""
        return [self.task.output_row(ex, p) for ex, p in zip(examples, self.predict(examples))]
