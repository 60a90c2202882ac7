"""Model cards: the ``README.md`` of every model directory that fine-tuning, pretraining and export write.

YAML metadata as the Hugging Face Hub reads it (``library_name: albert-lm``, license, ``base_model``,
tags, ``pipeline_tag``, datasets and a ``model-index`` of the measured scores, written with
``huggingface_hub.ModelCardData``), then a short human part: how the model was trained (the key
settings), how to load it with albert_lm and, where it can, with transformers (where it cannot:
why, `albert_lm.convert.hf.transformers_cannot_load`), and its scores. The scores are copied from the
run's own record (report.json), never measured again here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albert_lm._hub import hub_id_of
from albert_lm._io import atomic_write_text
from albert_lm.config import AlbertConfig, read_config_file

__all__ = ["CARD_FILE", "write_card", "write_export_card", "write_finetune_cards", "write_pretrain_card"]

logger = logging.getLogger(__name__)

CARD_FILE = "README.md"

# a task kind (albert_lm.tasks) -> the Hub's pipeline tag and its task name for the model-index
PIPELINES: dict[str, tuple[str, str]] = {
    "classification": ("text-classification", "Text Classification"),
    "regression": ("text-classification", "Text Classification"),
    "multiple_choice": ("multiple-choice", "Multiple Choice"),
    "span": ("question-answering", "Question Answering"),
    "token_classification": ("token-classification", "Token Classification"),
    "pretraining": ("fill-mask", "Fill-Mask"),
}
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "ax")
# the Hub datasets of the benchmarks the package fine-tunes on: task name -> (dataset id, config)
HUB_DATASETS: dict[str, tuple[str, str | None]] = {
    **{name: ("nyu-mll/glue", name) for name in GLUE_TASKS},
    "squad1.1": ("rajpurkar/squad", None),
    "squad2.0": ("rajpurkar/squad_v2", None),
    "race": ("ehovy/race", "all"),
}
NOT_METRICS = ("dir", "step", "selected_by")
_ROLES = {"best": "the best dev score", "last": "the final weights"}


def write_card(
    model_dir: Path,
    *,
    title: str,
    pipeline: str | None,
    base_model: str | None,
    dataset: tuple[str, str | None] | None,
    results: Mapping[str, Mapping[str, float]],
    trained: Mapping[str, Any],
    extra_tags: tuple[str, ...] = (),
    usage: str | None = None,
    name: str | None = None,
) -> Path:
    """Write ``model_dir/README.md`` (atomically) and return its path.

    Args:
        model_dir: a model directory (its ``config.json`` is read for the architecture).
        title: the model's name in the card and the model-index.
        pipeline: a key of `PIPELINES` (None: a bare encoder, ``feature-extraction``).
        base_model: the Hub id the model was trained from, when it is one.
        dataset: (Hub dataset id, config) of the training data, when it is a known one.
        results: ``{split: {metric: value}}`` measured on the dataset (the model-index).
        trained: the key settings of the training, as ``name: value`` lines of the card.
        extra_tags: tags besides ``albert`` and the pipeline's.
        usage: the card's "Use" section, where the directory is no PyTorch model directory (ONNX).
        name: how the examples of the card name the directory (default: its own name).
    """
    from huggingface_hub import EvalResult, ModelCardData

    config, raw = _config(model_dir)
    tag, task_name = PIPELINES.get(pipeline or "", ("feature-extraction", "Feature Extraction"))
    dataset_id, dataset_config = dataset if dataset else ("custom", None)
    evals = [
        EvalResult(
            task_type=tag,
            task_name=task_name,
            dataset_type=dataset_id,
            dataset_name=dataset_id,
            dataset_config=dataset_config,
            dataset_split=split,
            metric_type=metric,
            metric_name=metric,
            metric_value=float(value),
        )
        for split, metrics in results.items()
        for metric, value in metrics.items()
    ]
    data = ModelCardData(
        library_name="albert-lm",
        license="apache-2.0" if base_model and base_model.startswith(("albert/", "google/")) else "unknown",
        base_model=base_model,
        tags=["albert", config.model_type, *extra_tags],
        pipeline_tag=tag,
        datasets=[dataset_id] if dataset else None,
        model_name=title if evals else None,
        eval_results=evals or None,
    )
    text = f"---\n{data.to_yaml()}\n---\n\n" + _human_part(
        name or model_dir.name, title, config, raw, results, trained, usage
    )
    path = model_dir / CARD_FILE
    atomic_write_text(path, text)
    return path


def _config(model_dir: Path) -> tuple[AlbertConfig, dict[str, Any]]:
    raw = read_config_file(model_dir / "config.json")
    return AlbertConfig.from_dict(raw, source=str(model_dir / "config.json")), raw


def _human_part(
    name: str,
    title: str,
    config: AlbertConfig,
    raw: Mapping[str, Any],
    results: Mapping[str, Mapping[str, float]],
    trained: Mapping[str, Any],
    usage: str | None,
) -> str:
    from albert_lm.convert.hf import HEAD_KEY, transformers_cannot_load
    from albert_lm.model import HEADS

    head = raw.get(HEAD_KEY)
    cls = HEADS[head].__name__ if head in HEADS else "AlbertModel"
    size = (
        f"{config.model_type.upper()}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"embedding {config.embedding_size}, {config.num_attention_heads} heads, sharing {config.sharing!r}, "
        f"vocabulary {config.vocab_size}"
    )
    lines = [f"# {title}", "", f"`{cls}` ({size}), written by albert-lm.", "", "## Training", ""]
    lines += [f"- {key}: {_value(value)}" for key, value in trained.items() if value is not None]
    lines += ["", "## Use", ""]
    if usage is not None:
        return "\n".join([*lines, usage, "", *_scores(results)])
    lines += ["```python", "import albert_lm", ""]
    lines += [
        f'model = albert_lm.load_model("{name}")  # {cls}',
        f'tokenizer = albert_lm.load_tokenizer("{name}")',
        'inputs = tokenizer(["a first text", "a second one"], padding=True, return_tensors="pt")',
        "outputs = model(**inputs)",
        "```",
        "",
    ]
    why = transformers_cannot_load(config, head)
    if why:
        lines += [
            f"**transformers cannot load this model**: {why}. Its config.json names `model_type: "
            f"{raw.get('model_type')}`, which transformers refuses, rather than building a model with "
            "random weights in place of these. Load it with albert-lm.",
            "",
        ]
    else:
        auto = raw.get("architectures", ["AlbertModel"])[0]
        lines += [
            "With transformers:",
            "",
            "```python",
            f"from transformers import AutoTokenizer, {auto}",
            "",
            f'model = {auto}.from_pretrained("{name}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
            "```",
            "",
        ]
    return "\n".join([*lines, *_scores(results)])


def _scores(results: Mapping[str, Mapping[str, float]]) -> list[str]:
    if not results:
        return []
    lines = ["## Scores", "", "| split | metric | value |", "|---|---|---|"]
    lines += [f"| {s} | {m} | {v:.4f} |" for s, ms in results.items() for m, v in ms.items()]
    return [*lines, ""]


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a report.json checkpoint record (``dir``, ``step``, ``selected_by`` aside)."""
    return {
        k: float(v)
        for k, v in record.items()
        if k not in NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _by_split(metrics: Mapping[str, float], splits: list[str]) -> dict[str, dict[str, float]]:
    """Flat dev metrics (``<metric>`` of the first split, ``<split>_<metric>`` of the others) by split."""
    out: dict[str, dict[str, float]] = {s: {} for s in splits}
    for key, value in metrics.items():
        split = next((s for s in splits[1:] if key.startswith(f"{s}_")), splits[0])
        out[split][key.removeprefix(f"{split}_") if split != splits[0] else key] = value
    return {s: m for s, m in out.items() if m}


def _dataset_of(task: Mapping[str, Any]) -> tuple[str, str | None] | None:
    name = str(task.get("task", ""))
    if task.get("kind") == "span":
        return HUB_DATASETS.get(f"squad{task.get('version', '')}")
    return HUB_DATASETS.get(name)


def write_finetune_cards(run_dir: Path, report: Mapping[str, Any]) -> list[Path]:
    """The card of each model directory of a fine-tuning run (its best and last checkpoints), from the
    run's ``report.json`` (``report``): settings, and the dev metrics of that checkpoint."""
    task = report.get("task") or {}
    splits = list(report.get("num_dev_examples") or {"dev": 0})
    config = report.get("config") or {}
    written = []
    for role, record in (report.get("checkpoints") or {}).items():
        if not record or not record.get("dir"):
            continue
        model_dir = Path(record["dir"]) if Path(record["dir"]).is_absolute() else run_dir / record["dir"]
        if not (model_dir / "config.json").is_file():
            continue
        trained = {
            "task": task.get("task"),
            "from": hub_id_of(str(report.get("init", ""))) or report.get("init"),
            "training examples": report.get("num_train_examples"),
            "steps": f"{record.get('step')} of {report.get('total_steps')} (warmup {report.get('warmup_steps')})",
            **{
                k: config.get(k)
                for k in ("learning_rate", "batch_size", "max_seq_length", "seed", "precision")
            },
            "checkpoint": f"{role} ({record.get('selected_by') or _ROLES.get(role, role)})",
        }
        written.append(
            write_card(
                model_dir,
                title=f"albert-lm {task.get('task', 'fine-tuned')} ({role} checkpoint)",
                pipeline=task.get("kind"),
                base_model=hub_id_of(str(report.get("init", ""))),
                dataset=_dataset_of(task),
                results=_by_split(_metrics(record), splits),
                trained=trained,
                extra_tags=("fine-tuned",),
                name=f"{run_dir.name}/{record['dir']}",
            )
        )
    return written


def write_pretrain_card(model_dir: Path, cfg: Mapping[str, Any], result: Any) -> Path:
    """The card of a pretraining run's model directory: ``cfg`` (the run's `PretrainConfig.to_dict`) and
    its `TrainResult` ``result`` (the last evaluation's metrics, when there was one)."""
    model = cfg.get("model") or {}
    data = cfg.get("data") or {}
    optim = cfg.get("optim") or {}
    trained = {
        "from": hub_id_of(str(model.get("init_from") or ""))
        or model.get("init_from")
        or f"random initialization (preset {model.get('preset')})",
        "data": data.get("data_dir"),
        "steps": result.steps,
        "tokens": result.tokens,
        "stopped by": result.stop_reason,
        "max_seq_length": data.get("max_seq_length"),
        "masking": data.get("masking"),
        "learning_rate": optim.get("lr"),
        "optimizer": optim.get("name"),
        "global batch size": (cfg.get("run") or {}).get("global_batch_size"),
        "last training window": {k: round(v, 4) for k, v in (result.train_metrics or {}).items()},
    }
    evals = {k.removeprefix("eval_"): v for k, v in (result.eval_metrics or {}).items()}
    return write_card(
        model_dir,
        title=f"albert-lm pretrained {model.get('preset') or 'model'}",
        pipeline="pretraining",
        base_model=hub_id_of(str(model.get("init_from") or "")),
        dataset=None,
        results={"held-out": _metrics(evals)} if evals else {},
        trained=trained,
        extra_tags=("pretraining",),
    )


def write_export_card(
    out_dir: Path, report: Mapping[str, Any], info: Mapping[str, Any] | None, name: str
) -> Path:
    """The card of an ONNX export directory (``out_dir``, being written; ``name``: the directory it becomes):
    its source, the parity check, and the task metrics of a ``--calibrate-on`` file (``report["metrics"]``)
    per runtime (fp32, int8)."""
    metrics = report.get("metrics") or {}
    results = {
        f"{Path(str(metrics.get('file'))).name} ({runtime})": _metrics(values)
        for runtime, values in metrics.items()
        if isinstance(values, Mapping)
    }
    trained = {
        "exported from": report.get("source"),
        "model": report.get("model_class"),
        "ONNX opset": report.get("opset"),
        "max |ONNX - PyTorch|": max((report.get("parity") or {}).get("max_abs_diff", {0: 0}).values()),
        "int8": report.get("int8"),
    }
    task = info or {}
    return write_card(
        out_dir,
        title=f"albert-lm {task.get('task', 'encoder')} (ONNX)",
        pipeline=task.get("kind"),
        base_model=None,
        dataset=_dataset_of(task) if task else None,
        results={k: v for k, v in results.items() if v},
        trained=trained,
        extra_tags=("onnx",),
        usage=(
            "An ONNX Runtime export (`model.onnx`; `model.int8.onnx` with int8), with the tokenizer:\n\n"
            f"```\nalbert predict --model {name} --backend onnx --input texts.txt\n"
            f"albert serve --model {name} --backend onnx\n```"
        ),
        name=name,
    )
