"""Fine-tuned model directories for the export and serve tests, made in a second: a random albert-tiny
with a task head, a WordPiece vocabulary and the task.json that `albert finetune` would write."""

from __future__ import annotations

from pathlib import Path

import torch

from albert_lm.config import AlbertConfig

WORDS = [
    "a",
    "an",
    "the",
    "film",
    "movie",
    "story",
    "plot",
    "cast",
    "actor",
    "is",
    "was",
    "not",
    "very",
    "too",
    "quite",
    "rather",
    "so",
    "funny",
    "dull",
    "witty",
    "gorgeous",
    "mess",
    "bad",
    "good",
    "great",
    "awful",
    "boring",
    "charming",
    "long",
    "short",
    "slow",
    "fast",
    "and",
    "but",
    "or",
    "of",
    "in",
    "on",
    "who",
    "what",
    "where",
    "when",
    "why",
    "how",
    "many",
    "did",
    "does",
    "paris",
    "france",
    "capital",
    "city",
    "river",
]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ".", ",", "?", "!"]

# Sentences in the tiny vocabulary: short, long (truncated at the model's length), a question.
TEXTS = [
    "a witty , charming film .",
    "dull",
    "the cast is great and the story is funny but the plot is too long and too slow and boring " * 3,
    "not funny !",
    "a very good movie , quite charming",
    "awful",
    "who did the film ?",
]


def _config() -> AlbertConfig:
    return AlbertConfig.from_preset("albert-tiny", vocab_size=len(VOCAB))


def make_model_dir(path: Path, kind: str = "classification", *, seed: int = 0, pairs: bool = False) -> Path:
    """A fine-tuned model directory: ``classification`` (labels neg/pos; sentence pairs with ``pairs``),
    ``regression``, ``multiple_choice`` or ``squad_v2`` (the verifier head, threshold fixed at 0)."""
    from albert_lm.finetune.rundir import write_task_info
    from albert_lm.model import AlbertForMultipleChoice, AlbertForSequenceClassification, AlbertForSquadV2
    from albert_lm.tasks.classification import ClassificationTask
    from albert_lm.tasks.race import MultipleChoiceData, MultipleChoiceTask
    from albert_lm.tasks.squad import SquadTask

    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = _config()
    task: object
    if kind in ("classification", "regression"):
        labels = ["neg", "pos"] if kind == "classification" else None
        model = AlbertForSequenceClassification(config, num_labels=2 if labels else 1)
        if labels:
            model.label_names = labels  # type: ignore[assignment]
        metrics = ["accuracy"] if labels else ["pearson", "spearman"]
        task = ClassificationTask("custom", lambda split: [], labels, metrics, text_fields=2 if pairs else 1)
    elif kind == "multiple_choice":
        model = AlbertForMultipleChoice(config)
        task = MultipleChoiceTask(MultipleChoiceData(files={}), name="multiple_choice")
    elif kind == "squad_v2":
        model = AlbertForSquadV2(config)
        task = SquadTask("2.0", head="verifier", null_threshold=0.0, doc_stride=16, max_query_length=12)
    else:
        raise ValueError(kind)
    if kind != "squad_v2":  # spread the random head's logits, so that inputs get visibly different outputs
        with torch.no_grad():
            model.classifier.weight.mul_(50.0)
    model.save_pretrained(path)
    write_task_info(task, path, {"max_seq_length": 48})  # type: ignore[arg-type]
    return path


def write_polarity_like(path: Path) -> Path:
    """A headerless two-column CSV (label, text) like the polarity set, 12 rows."""
    rows = [
        ("pos", "a witty , charming film ."),
        ("neg", "a dull mess ."),
        ("pos", "the cast is great and the story is funny"),
        ("neg", "too long and too slow"),
        ("pos", "gorgeous"),
        ("neg", "boring plot , awful actor"),
        ("pos", "a very good movie"),
        ("neg", "the film was bad"),
        ("pos", "quite charming , rather funny"),
        ("neg", "not funny"),
        ("pos", "great great great"),
        ("neg", "awful"),
    ]
    path.write_text("".join(f'"{label}","{text}"\n' for label, text in rows), encoding="utf-8")
    return path
