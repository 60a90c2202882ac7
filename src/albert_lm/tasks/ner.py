"""Token classification: named entities from CoNLL files or rows of tokens and tags (`albert finetune ner`).

* Data: CoNLL columns, one token per line with its tag in the last column, a blank line between
  sentences, ``-DOCSTART-`` lines skipped; or JSONL / Parquet / Arrow files and ``datasets`` directories
  with a row per sentence: ``tokens`` (a list of words) and ``tags`` (``--tags-column``; strings, or
  integer ids named by ``--tag-names``) (`read_conll`). Tags are in IOB2 (BIO), IOB1, BIOES or BMES
  (`albert_lm.tasks.tag_schemes`; ``--tag-scheme auto`` reads it off the training file), converted to
  IOB2: ``O``, ``B-TYPE`` or ``I-TYPE``; an ``I-`` tag that follows no entity of its type starts one, as
  conlleval reads it. task.json and report.json name the files' scheme (``tag_scheme``).
* Features: ``[CLS] pieces [SEP]`` (`albert_lm.tasks.inputs.build_inputs`), each word encoded on its own and
  labelled on its first piece; the other pieces, the special tokens and the padding get ``IGNORE_INDEX``
  (no loss, no prediction). Words whose first piece falls beyond ``max_seq_length`` are tagged ``O``.
* Head: sequence output -> dropout -> dense (`albert_lm.model.heads.AlbertForTokenClassification`, the
  layers and names of transformers' class of that name).
* Metrics: entity-level precision, recall and F1 (`albert_lm.tasks.metrics.entity_scores`); F1 selects the
  best checkpoint.
* Prediction (`albert predict`, `albert serve`): a text (split into words and punctuation marks) or a
  list of ``tokens`` in, a tag per word and the entity spans out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from albert_lm._io import NotTextError, read_utf8
from albert_lm._tables import TableError, read_rows, table_format
from albert_lm.tasks import metrics as M
from albert_lm.tasks.base import Example, Task, TaskDataError, per_example
from albert_lm.tasks.collate import Batch, Feature, pad_features
from albert_lm.tasks.inputs import build_inputs
from albert_lm.tasks.tag_schemes import NAMES, SCHEMES, TAG_SCHEMES, TagSchemeError, detect_scheme, to_iob2

logger = logging.getLogger(__name__)

DOCSTART = "-DOCSTART-"
# How `albert predict` splits a text into words: runs of word characters (with inner hyphens and
# apostrophes, "Saint-Denis", "O'Neil") and single punctuation marks, the way CoNLL files are tokenized.
WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")

# BERT's recommended fine-tuning range (Devlin et al. 2019, Appendix A.3: lr {5e-5, 3e-5, 2e-5}, batch
# {16, 32}, epochs {2, 3, 4}); sequences of 128 pieces hold nearly every CoNLL sentence.
NER_PRESET: dict[str, Any] = dict(
    learning_rate=5e-5, batch_size=32, epochs=3.0, warmup_fraction=0.1, max_seq_length=128
)


def is_bio(tag: str) -> bool:
    """``O``, or ``B-`` / ``I-`` followed by a type."""
    return tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2)


# (first line or row, words, tags, the line or row of each tag): one sentence as a file holds it
RawSentence = tuple[int, list[str], list[str], list[int]]


def _conll_sentences(path: Path) -> list[RawSentence]:
    """The sentences of a CoNLL file, tags as written (see `read_conll`)."""
    try:
        text = read_utf8(path)
    except NotTextError as e:
        raise TaskDataError(str(e)) from None
    out: list[RawSentence] = []
    words: list[str] = []
    tags: list[str] = []
    lines: list[int] = []
    for number, line in enumerate([*text.split("\n"), ""], start=1):
        fields = line.split()
        if not fields or fields[0] == DOCSTART:
            if words:
                out.append((lines[0], words, tags, lines))
            words, tags, lines = [], [], []
            continue
        if len(fields) < 2:
            raise TaskDataError(
                f"{path}:{number}: no tag; a line holds a token and its tag (last column), got {line.strip()!r}"
            )
        words.append(fields[0])
        tags.append(fields[-1])
        lines.append(number)
    return out


def _row_sentences(path: Path, tags_column: str, tag_names: Sequence[str] | None) -> list[RawSentence]:
    """The sentences of a JSONL / Parquet / Arrow file or ``datasets`` directory: rows of ``tokens`` (a
    list of words) and ``tags_column`` (a list of tags: strings, or integers indexing ``tag_names``)."""
    try:
        rows = read_rows(path)
    except TableError as e:
        raise TaskDataError(str(e)) from None
    out: list[RawSentence] = []
    for n, row in rows:
        where = f"{path}:{n}"
        for column in ("tokens", tags_column):
            if column not in row:
                raise TaskDataError(f"{where}: no column {column!r} (columns: {', '.join(row)})")
        words, raw = row["tokens"], row[tags_column]
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise TaskDataError(f"{where}: 'tokens' must be a list of non-blank strings")
        if not isinstance(raw, list) or len(raw) != len(words):
            size = len(raw) if isinstance(raw, list) else type(raw).__name__
            raise TaskDataError(
                f"{where}: {tags_column!r} must be a list of one tag per token ({len(words)} tokens, got {size})"
            )
        tags = [_tag_name(t, tag_names, f"{where}: {tags_column}") for t in raw]
        if words:
            out.append((n, list(words), tags, [n] * len(words)))
    return out


def _tag_name(tag: Any, tag_names: Sequence[str] | None, where: str) -> str:
    if isinstance(tag, str):
        return tag
    if isinstance(tag, int) and not isinstance(tag, bool):
        if tag_names is None:
            raise TaskDataError(f"{where}: integer tag {tag}; give the tag names in id order (--tag-names)")
        if not 0 <= tag < len(tag_names):
            raise TaskDataError(f"{where}: tag id {tag} is outside --tag-names ({len(tag_names)} names)")
        return tag_names[tag]
    raise TaskDataError(f"{where}: tag {tag!r} is neither a string nor an integer id")


def read_sentences(
    path: str | Path, tags_column: str = "tags", tag_names: Sequence[str] | None = None
) -> list[RawSentence]:
    """The sentences of an NER file, tags as written: a CoNLL file (any name but the row formats'), or (by
    extension, `albert_lm._tables`) a JSONL / Parquet / Arrow file or ``datasets`` directory of ``tokens``
    + ``tags_column`` rows.

    Raises:
        FileNotFoundError: no such file.
        TaskDataError: naming ``file:line`` (CoNLL) or ``file:row``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        fmt = table_format(path)
    except TableError:
        fmt = "conll"
    if fmt in ("csv", "tsv", "conll"):  # CoNLL files are often named .tsv: columns, not a header row
        return _conll_sentences(path)
    return _row_sentences(path, tags_column, tag_names)


def read_conll(
    path: str | Path,
    allowed: Sequence[str] | None = None,
    scheme: str = "iob2",
    *,
    tags_column: str = "tags",
    tag_names: Sequence[str] | None = None,
) -> list[Example]:
    """The sentences of an NER file (`read_sentences`) with their tags in IOB2:
    ``Example(texts=(words joined by spaces,), label=tags, meta={"words", "file", "line"})``, ``line`` the
    sentence's first (a row's number for row files).

    Args:
        scheme: the file's tag scheme (`albert_lm.tasks.tag_schemes.SCHEMES`), converted to IOB2.
        allowed: the model's tags; a tag (after conversion) outside them is an error.

    Raises:
        FileNotFoundError: no such file.
        TaskDataError: ``file:line``: not UTF-8, a line without a tag, a tag that is not of ``scheme``, or
            (with ``allowed``) a tag outside ``allowed``.
    """
    path = Path(path)
    known = set(allowed) if allowed is not None else None
    examples: list[Example] = []
    for first, words, raw, lines in read_sentences(path, tags_column, tag_names):
        try:
            tags = to_iob2(raw, scheme)
        except TagSchemeError as e:
            bad = next(i for i, t in enumerate(raw) if str(e).startswith(f"tag {t!r}"))
            raise TaskDataError(f"{path}:{lines[bad]}: {e}") from None
        for tag, original, number in zip(tags, raw, lines):
            if known is not None and tag not in known:
                read_as = "" if tag == original else f" (read as {tag!r} from {scheme.upper()})"
                raise TaskDataError(
                    f"{path}:{number}: tag {original!r}{read_as} is not one of the model's tags "
                    f"({', '.join(sorted(known))})"
                )
        meta = {"words": list(words), "file": str(path), "line": first}
        examples.append(Example(f"{path.name}:{first}", (" ".join(words),), tags, meta))
    return examples


def file_scheme(path: str | Path, tags_column: str = "tags", tag_names: Sequence[str] | None = None) -> str:
    """The tag scheme of an NER file's tags (`albert_lm.tasks.tag_schemes.detect_scheme`).

    Raises:
        TaskDataError: naming the file, when its tags are of no scheme.
    """
    try:
        return detect_scheme(tags for _, _, tags, _ in read_sentences(path, tags_column, tag_names))
    except TagSchemeError as e:
        raise TaskDataError(f"{path}: {e}") from None


def tag_set(examples: Sequence[Example]) -> list[str]:
    """``O`` and then every other tag of ``examples``, sorted: the class ids of a model."""
    tags = {t for ex in examples for t in ex.label}
    return ["O", *sorted(tags - {"O"})]


def split_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of a text (`WORD`) and their character spans."""
    matches = list(WORD.finditer(text))
    return [m.group() for m in matches], [m.span() for m in matches]


class TokenClassificationTask(Task):
    """Named-entity recognition (any BIO tagging) from CoNLL files; see the module docstring."""

    kind = "token_classification"
    kinds = ("token_classification",)
    head_outputs: ClassVar[dict[str, tuple[str, ...]]] = {"token_classification": ("logits",)}
    metric_names = ("f1",)
    cli_help = "named entities (BIO tags) from CoNLL files: a tag per word, entity-level F1"

    def __init__(
        self,
        files: Mapping[str, str | Path],
        labels: Sequence[str] | None = None,
        name: str = "ner",
        *,
        tag_scheme: str = "auto",
        tag_names: Sequence[str] | None = None,
        tags_column: str = "tags",
    ) -> None:
        self.name = name
        self.files = {split: Path(p) for split, p in files.items()}
        self.test_splits = ("test",) if "test" in self.files else ()
        self.tag_names = list(tag_names) if tag_names is not None else None
        self.tags_column = tags_column
        if tag_scheme not in TAG_SCHEMES:
            raise TaskDataError(f"--tag-scheme {tag_scheme!r}: one of {', '.join(TAG_SCHEMES)}")
        self.tag_scheme = tag_scheme
        if tag_scheme == "auto":  # the training file's scheme, for every file of the run
            self.tag_scheme = "iob2"
            if self.train_split in self.files:
                self.tag_scheme = file_scheme(self.files[self.train_split], tags_column, self.tag_names)
                logger.info(
                    "%s: tag scheme %s (detected; converted to BIO/IOB2, the scheme the model is trained "
                    "and scored in; --tag-scheme to name it)",
                    self.files[self.train_split], NAMES[self.tag_scheme],
                )  # fmt: skip
        if labels is None:
            train = self.read_file(self.train_split, None)
            if not train:
                raise TaskDataError(f"{self.split_source(self.train_split)}: no sentences")
            labels = tag_set(train)
        bad = [t for t in labels if not is_bio(t)]
        if bad or "O" not in labels:
            raise TaskDataError(
                f"--labels: {', '.join(bad) or 'no O'}: tags are O, B-TYPE or I-TYPE, O among them"
            )
        self.labels = list(labels)

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> TokenClassificationTask:
        return cls(
            {}, labels=list(info["labels"]), name=str(info["task"]), tag_scheme=info.get("tag_scheme", "iob2")
        )

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def info(self) -> dict[str, Any]:
        """The task record; ``tag_scheme``: the scheme of the training files (the model's tags are IOB2)."""
        return {**super().info(), "labels": self.labels, "tag_scheme": self.tag_scheme}

    def split_source(self, split: str) -> str:
        return str(self.files[split]) if split in self.files else super().split_source(split)

    def read_file(self, split: str, allowed: Sequence[str] | None) -> list[Example]:
        if split not in self.files:
            raise FileNotFoundError(f"{self.name}: no {split} file")
        return read_conll(
            self.files[split],
            allowed,
            self.tag_scheme,
            tags_column=self.tags_column,
            tag_names=self.tag_names,
        )

    def read(self, split: str) -> list[Example]:
        return self.read_file(split, self.labels)

    @classmethod
    def read_labelled(
        cls, info: Mapping[str, Any], path: str | Path, columns: Sequence[str] | None = None
    ) -> list[Example]:
        scheme = str(info.get("tag_scheme", "iob2"))
        if scheme == "auto" or scheme not in SCHEMES:
            scheme = file_scheme(path)
        return read_conll(path, info.get("labels"), scheme)

    # -------------------------------------------------------------------------------- the model's view
    def featurize(self, examples: Sequence[Example], tokenizer: Any, max_length: int) -> list[Feature]:
        """``[CLS] pieces [SEP]``; ``word_starts``: the position of each word's first piece (the words
        that fit); ``labels`` (labelled examples): the tag id there, ``IGNORE_INDEX`` elsewhere."""
        from albert_lm.model.heads import IGNORE_INDEX

        if max_length < 3:
            raise ValueError(f"max_seq_length {max_length} leaves no room for text")
        features, cut = [], 0
        for i, ex in enumerate(examples):
            words = ex.meta["words"]
            pieces: list[int] = []
            starts: list[int] = []
            for word_ids in tokenizer.encode_ids_batch(words) if words else []:
                if len(pieces) >= max_length - 2:  # this word's first piece no longer fits
                    break
                starts.append(1 + len(pieces))  # after [CLS]
                pieces.extend(word_ids or [tokenizer.unk_id])  # a word of nothing the vocabulary has
            cut += len(starts) < len(words)
            ids, types = build_inputs(tokenizer, pieces[: max_length - 2])
            feat: Feature = {
                "input_ids": ids,
                "token_type_ids": types,
                "word_starts": starts,
                "example_index": i,
            }
            if ex.label is not None:
                labels = [IGNORE_INDEX] * len(ids)
                for w, pos in enumerate(starts):
                    labels[pos] = self.labels.index(ex.label[w])
                feat["labels"] = labels
            features.append(feat)
        if cut:
            logger.warning(
                "%d sentence(s) longer than %d pieces: their last words are tagged O", cut, max_length
            )
        return features

    def collate(self, features: Sequence[Feature], pad_id: int = 0, pad_to: int | None = None) -> Batch:
        """`pad_features`, and the per-token labels padded with ``IGNORE_INDEX`` to (B, T)."""
        import torch

        from albert_lm.model.heads import IGNORE_INDEX

        batch = pad_features(
            [{k: v for k, v in f.items() if k != "labels"} for f in features], pad_id, pad_to=pad_to
        )
        if all(f.get("labels") is not None for f in features):
            labels = torch.full(batch["input_ids"].shape, IGNORE_INDEX, dtype=torch.long)  # (B, T)
            for row, f in enumerate(features):
                labels[row, : len(f["labels"])] = torch.tensor(f["labels"])
            batch["labels"] = labels
        return batch

    def build_model(self, init: str | Path, *, require_head: bool = False, **config_overrides: Any) -> Any:
        from albert_lm.model.heads import AlbertForTokenClassification

        model = AlbertForTokenClassification.from_pretrained(
            init, num_labels=self.num_labels, require_head=require_head, **config_overrides
        )
        model.label_names = list(self.labels)  # type: ignore[assignment]  # -> config.json id2label
        return model

    def postprocess(
        self,
        outputs: Sequence[Mapping[str, np.ndarray]],
        examples: Sequence[Example],
        features: Sequence[Feature],
    ) -> list[dict[str, Any]]:
        """``{"guid", "tags"}``: the most likely tag at each word's first piece; ``O`` past the window."""
        return per_example(outputs, examples, features, self._record)

    def _record(self, out: Mapping[str, np.ndarray], feat: Feature, example: Example) -> dict[str, Any]:
        starts = feat["word_starts"]
        logits = np.asarray(out["logits"])  # (T, num_labels), T padded to the batch's longest
        best = logits[starts].argmax(-1) if starts else []
        tags = [self.labels[int(k)] for k in best]
        tags += ["O"] * (len(example.meta["words"]) - len(tags))
        return {"guid": example.guid, "tags": tags}

    def compute_metrics(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, float]:
        if any(ex.label is None for ex in examples):
            raise ValueError(f"{self.name}: cannot compute metrics on unlabelled examples")
        return M.entity_scores([p["tags"] for p in predictions], [ex.label for ex in examples])

    def metric_breakdown(
        self, predictions: Sequence[Mapping[str, Any]], examples: Sequence[Example]
    ) -> dict[str, Any]:
        """``{"per_type": ...}``: precision, recall, F1 and support per entity type
        (`albert_lm.tasks.metrics.entity_report`), for report.json and the end of finetune / evaluate."""
        return {"per_type": M.entity_report([p["tags"] for p in predictions], [ex.label for ex in examples])}

    # ----------------------------------------------------------------------------- predict and serve
    def request_fields(self) -> tuple[str, ...]:
        return ("texts", "items")

    def predict_examples(
        self,
        records: Sequence[Mapping[str, Any]],
        numbers: Sequence[int],
        source: str,
        *,
        text_field: str | None = None,
        pair_field: str | None = None,
    ) -> list[Example]:
        """Text lines (split into words, `split_words`), or JSON objects with ``tokens`` (a list of words)
        or a text in ``text_field`` (default ``text``)."""
        text_field = text_field or "text"
        examples = []
        for rec, n in zip(records, numbers):
            meta: dict[str, Any]
            if "_texts" in rec or text_field in rec:
                text = "\t".join(rec["_texts"]) if "_texts" in rec else rec[text_field]
                if not isinstance(text, str):
                    raise TaskDataError(f"{source}:{n}: field {text_field!r} is not a string")
                words, spans = split_words(text)
                meta = {"words": words, "spans": spans}
            elif "tokens" in rec:
                words = rec["tokens"]
                if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
                    raise TaskDataError(f"{source}:{n}: 'tokens' must be a list of non-blank strings")
                text, meta = " ".join(words), {"words": list(words)}
            else:
                raise TaskDataError(
                    f"{source}:{n}: no field 'tokens' (a list of words) or {text_field!r} (use --text-field)"
                )
            examples.append(Example(str(rec.get("id", n)), (text,), None, meta))
        return examples

    def output_row(self, example: Example, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """``{["text",] "tokens", "tags", "entities": [{"type", "text", "start", "end"}]}``: ``start`` /
        ``end`` (exclusive) count words, and for a text input also ``char_start`` / ``char_end``."""
        words, tags = example.meta["words"], prediction["tags"]
        spans = example.meta.get("spans")
        entities = []
        for kind, start, end in M.entity_spans(tags):
            entity: dict[str, Any] = {
                "type": kind,
                "text": " ".join(words[start:end]),
                "start": start,
                "end": end,
            }
            if spans is not None:
                a, b = spans[start][0], spans[end - 1][1]
                entity.update(text=example.texts[0][a:b], char_start=a, char_end=b)
            entities.append(entity)
        row: dict[str, Any] = {"text": example.texts[0]} if spans is not None else {}
        return {**row, "tokens": list(words), "tags": list(tags), "entities": entities}

    # ------------------------------------------------------------------------------------ command line
    @classmethod
    def cli_arguments(cls, parser: Any, mode: str) -> None:
        g = parser.add_argument_group(
            "data: CoNLL files (token ... tag per line, blank line between sentences), or JSONL / Parquet / "
            "Arrow files or datasets directories of tokens + tags rows"
        )
        g.add_argument("--train", type=Path, required=mode == "finetune", help="training file")
        g.add_argument(
            "--dev",
            type=Path,
            required=mode == "finetune",
            help="dev file (entity F1 picks the best checkpoint)",
        )
        g.add_argument("--test", type=Path, help="labelled test file to predict after training")
        g.add_argument(
            "--labels",
            help="comma-separated tag set, in class-id order (default: O, then the training tags sorted)",
        )
        g.add_argument("--name", default="ner", help="task name used in reports")
        g.add_argument(
            "--tag-scheme",
            choices=TAG_SCHEMES,
            default="auto",
            help="the files' tag scheme, converted to BIO/IOB2 (default auto: read off the training file's tags)",
        )
        g.add_argument(
            "--tags-column", default="tags", help="the column of a row file holding the tags (default tags)"
        )
        g.add_argument(
            "--tag-names",
            help="comma-separated tag names in id order, for row files whose tags are integer ids",
        )

    @classmethod
    def cli_task(
        cls, args: Any, info: Mapping[str, Any] | None = None
    ) -> tuple[TokenClassificationTask, dict[str, Any]]:
        files = {s: getattr(args, s) for s in ("train", "dev", "test") if getattr(args, s, None) is not None}
        labels: Sequence[str] | None = args.labels.split(",") if args.labels else None
        if info is not None:
            labels = list(info["labels"])  # a fine-tuned model fixes the class ids
        scheme = getattr(args, "tag_scheme", "auto")
        if info is not None and scheme == "auto":
            scheme = str(info.get("tag_scheme", "iob2"))
        task = cls(
            files,
            labels=labels,
            name=args.name,
            tag_scheme=scheme,
            tag_names=args.tag_names.split(",") if getattr(args, "tag_names", None) else None,
            tags_column=getattr(args, "tags_column", "tags"),
        )
        return task, NER_PRESET

    @classmethod
    def cli_preset(cls) -> tuple[Mapping[str, Any], str]:
        return NER_PRESET, ""
