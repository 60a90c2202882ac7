"""``--backend auto``: the backend that runs a fine-tuned model fastest on this machine, among those that
give its answers; measured once, then remembered.

The candidates are PyTorch (fp32 with the fp32 linear library `albert_lm.runtime.fp32_linear` picks, or
torch.ao dynamic int8) and ONNX Runtime (``model.onnx`` / ``model.int8.onnx``: the model directory's own
export, else one made once and kept in the cache directory). Neither wins everywhere: ONNX Runtime's fp32
GEMM is ~1.9x torch's MKL on AMD cores and even on Intel ones at one sequence, while int8 goes
either way with the CPU's int8 instructions. So `choose_backend`:

1. builds a fixed probe batch (`PROBE_SHAPE`: one sequence of 128 tokens, or the model's length if
   shorter; `albert_lm.infer.graph.example_inputs`) and runs it through PyTorch fp32: the reference answers;
2. runs every candidate once on it (a warm-up) and refuses one whose answers differ from the reference by
   more than the export's own check allows (`albert_lm.infer.onnx.FP32_TOLERANCE` in fp32; `INT8_TOLERANCE`,
   relative to the largest output, for int8, which moves the answers by design). An ONNX int8 file whose
   export measured a task score on a labelled file (``albert export onnx --int8 --calibrate-on``) is
   refused when int8 lost more than `INT8_SCORE_DROP` there;
3. times the candidates taking turns, `PROBE_CALLS` calls each (a few hundred ms on albert-base), and keeps
   the fastest median (`pick`; a tie keeps the first, PyTorch);
4. logs the outcome once ("backend: onnx fp32 (75 ms) over torch fp32 (142 ms) for 1x128") and writes it to
   the cache (`ChoiceCache`: ``backend-choice.json`` in ``$ALBERT_CACHE_DIR``, else
   ``$XDG_CACHE_HOME/albert``, else ``~/.cache/albert``), keyed by the content of the model's files (sha256), the
   CPU (model name, flags, cores usable), the thread count, the library versions and int8. The next start
   with the same key builds only the chosen backend.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from albert_lm._io import atomic_write_json
from albert_lm.data.shards import sha256_file
from albert_lm.infer.settings import BACKENDS
from albert_lm.tasks.base import ModelDirError, PredictFn

logger = logging.getLogger(__name__)

"""The values of ``--backend``: ``auto`` measures, the others are taken as given."""
PROBE_SHAPE = (1, 128)
"""(sequences, tokens) of the probe batch; tokens are capped at the model's sequence length."""
PROBE_CALLS = 3
"""Timed calls per candidate (after one warm-up call that also checks its answers)."""
INT8_TOLERANCE = 0.1
"""An int8 backend's largest output difference to PyTorch fp32, as a fraction of the largest |output| (at
least 1): dynamic int8 moves logits by ~1-2% of their range (bench_inference: 2e-3 to 2e-2 on logits of
~0.5); a backend ten times further off is broken, not quantized."""
INT8_SCORE_DROP = 0.01
"""Most task score an ONNX int8 file may have lost to fp32 on its export's labelled file (`--calibrate-on`)."""
CACHE_FILE = "backend-choice.json"
CACHE_ENV = "ALBERT_CACHE_DIR"

Builder = Callable[[], PredictFn]


@dataclass(frozen=True)
class Trial:
    """One candidate on the probe batch: its median time, its difference to the reference, or why it was
    refused (then ``ms`` is None)."""

    backend: str
    ms: float | None = None
    max_abs_diff: float | None = None
    refused: str | None = None


def pick(trials: Sequence[Trial]) -> Trial:
    """The fastest trial that was not refused (the first of equal medians).

    Raises:
        ModelDirError: every candidate was refused (the message lists why).
    """
    usable = [t for t in trials if t.refused is None and t.ms is not None]
    if not usable:
        reasons = "; ".join(f"{t.backend}: {t.refused}" for t in trials)
        raise ModelDirError(f"no backend gives this model's answers ({reasons})")
    return min(usable, key=lambda t: t.ms if t.ms is not None else float("inf"))


def summary(chosen: str, trials: Sequence[Trial], int8: bool, shape: tuple[int, int]) -> str:
    """The one log line of a choice: ``backend: onnx fp32 (75 ms) over torch fp32 (142 ms) for 1x128``."""
    kind = "int8" if int8 else "fp32"

    def label(t: Trial) -> str:
        return f"{t.backend} {kind} ({t.ms:.0f} ms)" if t.ms is not None else f"{t.backend} {kind}"

    best = next(t for t in trials if t.backend == chosen)
    others = [label(t) for t in trials if t is not best and t.refused is None]
    refused = [f"{t.backend} {kind} refused: {t.refused}" for t in trials if t.refused is not None]
    text = f"backend: {label(best)}"
    if others:
        text += " over " + ", ".join(others)
    text += f" for {shape[0]}x{shape[1]}"
    return text + ("; " + "; ".join(refused) if refused else "")


def max_abs_diff(reference: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> float:
    """The largest |got - reference| over the reference's outputs (an output missing or NaN: infinite)."""
    worst = 0.0
    for name, want in reference.items():
        if name not in got or np.shape(got[name]) != np.shape(want):
            return float("inf")
        diff = np.abs(np.asarray(got[name], np.float64) - np.asarray(want, np.float64))
        if diff.size:
            top = float(diff.max())
            worst = max(worst, top if np.isfinite(top) else float("inf"))  # NaN: never within tolerance
    return worst


def tolerance(reference: Mapping[str, np.ndarray], int8: bool) -> float:
    """How far a candidate may be from the reference: the export's fp32 check, or `INT8_TOLERANCE` of the
    largest |output| (at least 1) for int8."""
    from albert_lm.infer.onnx import FP32_TOLERANCE

    if not int8:
        return FP32_TOLERANCE
    scale = max([1.0] + [float(np.abs(v).max()) for v in reference.values() if np.size(v)])
    return INT8_TOLERANCE * scale


def measure(
    fns: Mapping[str, PredictFn], batch: Mapping[str, Any], calls: int = PROBE_CALLS
) -> dict[str, float]:
    """Median milliseconds of each function on ``batch``, the functions taking turns call by call (a load
    change on a shared machine hits all of them alike)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(batch)  # type: ignore[arg-type]
            times[name].append(1e3 * (time.perf_counter() - t0))
    return {name: statistics.median(t) for name, t in times.items()}


def probe(
    builders: Mapping[str, Builder],
    batch: Mapping[str, Any],
    reference: Mapping[str, np.ndarray],
    int8: bool,
    refused: Mapping[str, str] | None = None,
    timer: Callable[[Mapping[str, PredictFn], Mapping[str, Any]], dict[str, float]] = measure,
) -> tuple[list[Trial], dict[str, PredictFn]]:
    """Build each candidate, check its answers on ``batch`` against ``reference`` and time those that
    agree (``timer``: `measure`, or injected timings in tests). ``refused``: candidates known to be unusable
    beforehand, with why. Returns the trials (in ``builders``' order) and the built functions that agree."""
    limit = tolerance(reference, int8)
    refused = dict(refused or {})
    diffs: dict[str, float] = {}
    fns: dict[str, PredictFn] = {}
    for name, build in builders.items():
        if name in refused:
            continue
        try:
            fn = build()
            diff = max_abs_diff(reference, fn(batch))  # type: ignore[arg-type]  # also the warm-up call
        except (ImportError, ModelDirError, ValueError, RuntimeError, OSError) as e:
            refused[name] = (
                f"{e.name} is not installed" if isinstance(e, ImportError) and e.name else str(e)
            ).splitlines()[0]
            continue
        diffs[name] = diff
        if not diff <= limit:  # NaN refused too
            refused[name] = f"its outputs differ from PyTorch fp32 by {diff:.3g} (tolerance {limit:.3g})"
            continue
        fns[name] = fn
    times = timer(fns, batch) if fns else {}
    trials = [Trial(name, times.get(name), diffs.get(name), refused.get(name)) for name in builders]
    return trials, fns


# ------------------------------------------------------------------------------------------- cache
def cache_dir() -> Path:
    """``$ALBERT_CACHE_DIR``, else ``$XDG_CACHE_HOME/albert``, else ``~/.cache/albert``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "albert"


def cpu_signature(threads: int | None) -> dict[str, Any]:
    """What makes one backend faster than another here: the CPU model and flags, the cores usable, the
    thread count and the library versions."""
    import torch

    name, flags = platform.processor() or platform.machine(), ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        lines = text.splitlines()
        name = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), name)
        flags = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("flags")), "")
    except OSError:
        pass
    try:
        import onnxruntime

        ort = str(onnxruntime.__version__)
    except ImportError:
        ort = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": name,
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "cores": cores,
        "threads": threads or torch.get_num_threads(),
        "torch": torch.__version__,
        "onnxruntime": ort,
    }


_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of ``path``'s content, remembered in this process by (path, inode, size, mtime, ctime): a
    rewrite changes the ctime, which no tool sets back (``touch -r`` and copies keep size and mtime)."""
    st = path.stat()
    ident = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if ident not in _DIGESTS:
        _DIGESTS[ident] = sha256_file(path)
    return _DIGESTS[ident]


def content_key(
    model_dir: Path, names: Sequence[str] = ("model.safetensors", "config.json")
) -> dict[str, str]:
    """``{file name: sha256}`` of those of ``names`` that ``model_dir`` holds: what its answers depend on."""
    return {name: file_digest(model_dir / name) for name in names if (model_dir / name).is_file()}


def cache_key(model_dir: Path, int8: bool, threads: int | None, shape: tuple[int, int]) -> str:
    """The key of a choice: the content of the model's files (sha256: new weights with the old size and
    mtime are another model), the CPU signature, int8, shape."""
    files = content_key(model_dir, ("model.safetensors", "config.json", "model.onnx", "model.int8.onnx"))
    key = {
        "model_dir": str(model_dir.resolve()),
        "files": files,
        "int8": int8,
        "shape": list(shape),
        **cpu_signature(threads),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


class ChoiceCache:
    """Choices by `cache_key`, in one JSON file (``directory / CACHE_FILE``). A cache that cannot be read
    is ignored, one that cannot be written is skipped with a warning: the choice is then measured again at
    the next start, nothing fails."""

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or cache_dir()) / CACHE_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._read().get(key)
        ok = isinstance(entry, dict) and entry.get("backend") in BACKENDS[1:]
        return entry if ok else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        data = self._read()
        data[key] = entry
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, data, indent=1)
        except OSError as e:
            logger.warning("backend choice not cached (%s): %s", self.path, e)


# ------------------------------------------------------------------------------------- the choice
def choose_backend(
    model_dir: Path,
    builders: Mapping[str, Builder],
    reference: Callable[[], tuple[Mapping[str, Any], Mapping[str, np.ndarray]]],
    *,
    int8: bool,
    threads: int | None,
    shape: tuple[int, int] = PROBE_SHAPE,
    refused: Mapping[str, str] | None = None,
    cache: ChoiceCache | None = None,
    timer: Callable[[Mapping[str, PredictFn], Mapping[str, Any]], dict[str, float]] = measure,
) -> tuple[str, PredictFn]:
    """The fastest agreeing backend of ``builders`` (name -> a function building its predict function)
    for the model in ``model_dir``, and its predict function (see the module docstring).

    Args:
        reference: () -> (probe batch, PyTorch fp32 outputs on it).
        refused: candidates unusable beforehand, with why (e.g. an int8 file that lost score).
        cache: where choices are remembered (default: `cache_dir`).
        timer: `measure`; tests inject timings.

    Raises:
        ModelDirError: no candidate gives the model's answers.
    """
    cache = cache if cache is not None else ChoiceCache()
    key = cache_key(model_dir, int8, threads, shape)
    known = cache.get(key)
    if known is not None and known["backend"] in builders and known["backend"] not in (refused or {}):
        logger.info("%s (cached in %s)", known.get("summary", f"backend: {known['backend']}"), cache.path)
        return known["backend"], builders[known["backend"]]()
    batch, want = reference()
    trials, fns = probe(builders, batch, want, int8, refused, timer)
    best = pick(trials)
    text = summary(best.backend, trials, int8, shape)
    logger.info("%s", text)
    cache.put(
        key,
        {
            "backend": best.backend,
            "summary": text,
            "model_dir": str(model_dir),
            "trials": [asdict(t) for t in trials],
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )
    return best.backend, fns[best.backend]


def int8_score_refusal(export_dir: Path) -> str | None:
    """Why ``export_dir``'s int8 file is refused by its export's labelled-file check, or None: the report of
    ``albert export onnx --int8 --calibrate-on`` records fp32 and int8 task scores."""
    from albert_lm.infer.onnx_files import REPORT_FILE

    try:
        report = json.loads((export_dir / REPORT_FILE).read_text(encoding="utf-8"))
        change = float(report["metrics"]["score_change"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if change < -INT8_SCORE_DROP:
        return (
            f"its export measured a task score {-change:.3f} below fp32 on {report['metrics'].get('file')} "
            f"(more than {INT8_SCORE_DROP:g})"
        )
    return None


def export_cache_dir(model_dir: Path) -> Path:
    """Where ``--backend auto`` keeps the ONNX export of a model directory that has none: under the cache
    directory, keyed by the content of its weights and config.json (`content_key`: new weights get a new
    export, whatever their size and mtime)."""
    ident = json.dumps({"model_dir": str(model_dir.resolve()), **content_key(model_dir)}, sort_keys=True)
    return cache_dir() / "onnx" / hashlib.sha256(ident.encode()).hexdigest()[:24]


def auto_predict_fn(
    finetuned: Any,
    *,
    int8: bool,
    threads: int | None,
    device: str | None = None,
    cache: ChoiceCache | None = None,
) -> tuple[str, PredictFn]:
    """``(backend, predict function)`` of `choose_backend` for a fine-tuned model (`albert_lm.finetune.rundir.
    FineTuned`) on the CPU; on another device PyTorch, and for an export directory without PyTorch weights
    ONNX Runtime, without measuring."""
    from albert_lm.infer.graph import example_inputs
    from albert_lm.infer.runners import load_torch_model, ort_predict_fn, torch_predict_fn

    model_dir = Path(finetuned.model_dir)
    if device not in (None, "cpu"):
        return "torch", torch_predict_fn(load_torch_model(finetuned, int8, threads, device))
    if not (model_dir / "model.safetensors").is_file():
        logger.info("backend: onnx (%s has no PyTorch weights)", model_dir)
        return "onnx", ort_predict_fn(onnx_session(model_dir, int8, threads))
    fp32: list[Any] = []

    def fp32_model() -> Any:  # loaded once: the reference, and the fp32 torch candidate
        if not fp32:
            fp32.append(load_torch_model(finetuned, False, threads, "cpu"))
        return fp32[0]

    shape = (PROBE_SHAPE[0], min(PROBE_SHAPE[1], finetuned.max_seq_length))

    def reference() -> tuple[Mapping[str, Any], Mapping[str, np.ndarray]]:
        model = fp32_model()
        batch = example_inputs(model, batch=shape[0], seq=shape[1])
        return batch, torch_predict_fn(model)(batch)  # type: ignore[arg-type]

    def torch_fn() -> PredictFn:
        return torch_predict_fn(load_torch_model(finetuned, True, threads, "cpu") if int8 else fp32_model())

    def onnx_fn() -> PredictFn:
        return ort_predict_fn(onnx_session(model_dir, int8, threads, export_to=export_cache_dir(model_dir)))

    refused = {}
    if int8:
        exported = model_dir if (model_dir / "model.onnx").is_file() else export_cache_dir(model_dir)
        why = int8_score_refusal(exported)
        if why:
            refused["onnx"] = why
    return choose_backend(
        model_dir,
        {"torch": torch_fn, "onnx": onnx_fn},
        reference,
        int8=int8,
        threads=threads,
        shape=shape,
        refused=refused,
        cache=cache,
    )


def onnx_session(model_dir: Path, int8: bool, threads: int | None, export_to: Path | None = None) -> Any:
    """An ONNX Runtime session of ``model_dir``'s exported file (``model.onnx`` / ``model.int8.onnx``). A
    model directory without one is exported first: into ``export_to`` when given (kept: the next call
    finds it there), else into a temporary directory (the ONNX Runtime session keeps the graph in memory).

    Raises:
        ModelDirError: an export directory without the int8 file, or an export that fails its checks.
    """
    from albert_lm.infer.onnx import load_session
    from albert_lm.infer.onnx_files import INT8_FILE, ONNX_FILE

    name = INT8_FILE if int8 else ONNX_FILE
    if (model_dir / name).is_file():
        return load_session(model_dir / name, threads)
    if (model_dir / ONNX_FILE).is_file():  # an export directory made without --int8
        raise ModelDirError(f"{model_dir}: no {name}; export with `albert export onnx --int8`")
    if export_to is not None:
        if not (export_to / name).is_file():
            logger.info("%s has no %s: exporting it once, to %s", model_dir, name, export_to)
            _export(model_dir, export_to, int8, threads)
        return load_session(export_to / name, threads)
    logger.info("%s has no %s: exporting it first", model_dir, name)
    with tempfile.TemporaryDirectory() as tmp:
        _export(model_dir, Path(tmp) / "onnx", int8, threads)
        return load_session(Path(tmp) / "onnx" / name, threads)


def _export(model_dir: Path, out: Path, int8: bool, threads: int | None) -> None:
    """The ONNX files of a fine-tuned model directory, checked (`write_checked_onnx`), written atomically
    into ``out`` with a report of the checks."""
    from albert_lm._io import atomic_write_dir
    from albert_lm.finetune.rundir import load_finetuned
    from albert_lm.infer.onnx_files import REPORT_FILE, ExportError, write_checked_onnx

    model = load_finetuned(model_dir).load_model("cpu").eval()
    report: dict[str, Any] = {"source": str(model_dir), "model_class": type(model).__name__}

    def write(tmp: Path) -> None:
        write_checked_onnx(model, tmp, report, int8=int8, opset=None, threads=threads)
        atomic_write_json(tmp / REPORT_FILE, report, indent=2)

    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # the export is written beside it, then renamed
        atomic_write_dir(out, write)
    except ExportError as e:
        raise ModelDirError(str(e)) from None
