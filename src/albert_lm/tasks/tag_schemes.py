"""Entity tag schemes: IOB2 (BIO), IOB1, BIOES and BMES, each converted to IOB2, the one scheme the NER
task trains, predicts and scores in.

* ``iob2`` (BIO): every entity starts with ``B-TYPE``, continues with ``I-TYPE`` (CoNLL-2003 as most
  copies ship it, OntoNotes conversions).
* ``iob1``: an entity starts with ``I-TYPE``; ``B-TYPE`` only where an entity follows one of its own type
  (the original CoNLL-2003 files). An ``I-`` that continues no entity of its type starts one.
* ``bioes`` (BILOU with E/S spellings): ``B-`` begin, ``I-`` inside, ``E-`` end, ``S-`` a one-token entity.
* ``bmes`` (Chinese NER corpora): ``B-`` begin, ``M-`` middle, ``E-`` end, ``S-`` single.

`detect_scheme` reads the scheme off the tags of a training file; `to_iob2` converts one sentence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["SCHEMES", "TAG_SCHEMES", "TagSchemeError", "detect_scheme", "to_iob2"]

SCHEMES = ("iob2", "iob1", "bioes", "bmes")
TAG_SCHEMES = ("auto", *SCHEMES)  # the choices of --tag-scheme
_PREFIXES = {"iob2": "BI", "iob1": "BI", "bioes": "BIES", "bmes": "BMES"}
NAMES = {"iob2": "BIO", "iob1": "IOB1", "bioes": "BIOES", "bmes": "BMES"}


class TagSchemeError(ValueError):
    """A tag that its scheme does not have (the message says which tag and which scheme)."""


def _split(tag: str) -> tuple[str, str]:
    """(prefix, type): ``("B", "PER")`` for ``B-PER``, ``("O", "")`` for ``O``, ``("", tag)`` for a tag
    without an ``X-`` prefix (a tag of no scheme)."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[1] == "-":
        return tag[0], tag[2:]
    return "", tag


def check_tag(tag: str, scheme: str) -> None:
    """Raise `TagSchemeError` unless ``tag`` is ``O`` or ``X-TYPE`` with ``X`` a prefix of ``scheme``."""
    prefix, _ = _split(tag)
    if prefix != "O" and (not prefix or prefix not in _PREFIXES[scheme]):
        *rest, last = ["O", *(f"{p}-TYPE" for p in _PREFIXES[scheme])]
        raise TagSchemeError(f"tag {tag!r} is not a {NAMES[scheme]} tag ({', '.join(rest)} or {last})")


def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """The scheme of a file's tag sequences: ``M-`` tags make it BMES, ``E-`` / ``S-`` tags BIOES, an
    ``I-`` tag that starts an entity (after ``O``, at the start or after another type) IOB1, else IOB2.

    Tags of no scheme (``PERSON``) are passed over here; `to_iob2` refuses them.

    Raises:
        TagSchemeError: both ``M-`` and ``I-`` tags.
    """
    prefixes: set[str] = set()
    iob1 = False
    for tags in sentences:
        previous = ("O", "")
        for tag in tags:
            prefix, kind = _split(tag)
            if prefix not in ("O", "B", "I", "M", "E", "S"):
                continue  # a tag of no scheme: the conversion (`to_iob2`) names it and its line
            prefixes.add(prefix)
            if prefix == "I" and not (previous[0] in ("B", "I") and previous[1] == kind):
                iob1 = True
            previous = (prefix, kind)
    if "M" in prefixes:
        if "I" in prefixes:
            raise TagSchemeError("both M- and I- tags: neither BMES nor BIOES; pass --tag-scheme")
        return "bmes"
    if prefixes & {"E", "S"}:
        return "bioes"
    return "iob1" if iob1 else "iob2"


def to_iob2(tags: Sequence[str], scheme: str) -> list[str]:
    """One sentence's tags in IOB2. IOB2 tags are only checked (an ``I-`` after ``O`` stays: conlleval and
    `albert_lm.tasks.metrics.entity_spans` read it as starting an entity).

    Raises:
        TagSchemeError: a tag that ``scheme`` does not have.
    """
    if scheme not in SCHEMES:
        raise TagSchemeError(f"unknown tag scheme {scheme!r}; one of {', '.join(SCHEMES)}")
    out: list[str] = []
    previous = ("O", "")
    for tag in tags:
        check_tag(tag, scheme)
        prefix, kind = _split(tag)
        if prefix == "O":
            out.append("O")
        elif prefix in "BS":
            out.append(f"B-{kind}")
        elif scheme == "iob2":
            out.append(tag)
        else:  # I of IOB1, I / M / E of BIOES and BMES: inside an entity of its type, else starting one
            continues = previous[0] in ("B", "I", "M") and previous[1] == kind
            out.append(f"I-{kind}" if continues else f"B-{kind}")
        # an E- or S- closes its entity: the next I- / M- / E- of the same type starts another
        previous = ("O", "") if prefix in "ES" else (prefix, kind)
    return out
