"""MediaWiki markup -> plain paragraphs, for `albert prepare --format wiki` (`albert_lm.data.documents`): templates,
tables, references, media links and the sections after which an article is only lists are dropped; links keep
their text."""

from __future__ import annotations

import html
import re

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_DROP_ELEMENTS = re.compile(
    r"<(ref|math|gallery|timeline|table|score|syntaxhighlight|source|pre|imagemap|chem|hiero|graph|mapframe|"
    r"references|nowiki|code|ce)\b[^>]*?(/>|>.*?</\1\s*>)",
    re.S | re.I,
)
_SELF_CLOSING_REF = re.compile(r"<ref\b[^>]*/>", re.I)
_TAG = re.compile(r"</?[a-zA-Z][^<>]*?/?>")
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_TABLE = re.compile(r"\{\|(?:(?!\{\|).)*?\|\}", re.S)
_MEDIA_LINK = re.compile(
    r"\[\[\s*(?:file|image|media|category|wikipedia|wp|template|help|portal|special|talk|user|[a-z]{2,3}(?:-[a-z]+)?)\s*:[^\[\]]*\]\]",
    re.I,
)
_PIPED_LINK = re.compile(r"\[\[([^\[\]|]*)\|([^\[\]]*)\]\]")
_PLAIN_LINK = re.compile(r"\[\[([^\[\]|]*)\]\]")
_EXT_LINK_TEXT = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\s+([^\]]*)\]")
_EXT_LINK_BARE = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\]")
_BOLD_ITALIC = re.compile(r"'{2,5}")
_HEADING = re.compile(r"^\s*(=+)\s*(.*?)\s*\1\s*$")
_MAGIC = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r"\(\s*[,;:]?\s*\)")
_REPEATED_COMMA = re.compile(r"(?:\s*,){2,}")
_SPACES = re.compile(r"[ \t\u00a0]+")
_SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:!?])")
# Sections after which an article is only lists of links and citations.
_END_SECTIONS = frozenset(
    {
        "see also",
        "references",
        "external links",
        "further reading",
        "notes",
        "bibliography",
        "sources",
        "footnotes",
        "citations",
        "notes and references",
        "references and notes",
        "works cited",
    }
)


def _remove_nested(pattern: re.Pattern[str], text: str, limit: int = 50) -> str:
    for _ in range(limit):
        text, n = pattern.subn("", text)
        if n == 0:
            break
    return text


def strip_wiki_markup(wikitext: str) -> list[str]:
    """Plain-text paragraphs of a MediaWiki article.

    Keeps prose paragraphs and the visible text of links; drops templates, tables, references, comments,
    media and category links, headings, lists and indented lines, and everything from the first
    "See also" / "References" / "External links" style section on.
    """
    text = html.unescape(wikitext)  # the XML layer decoded one level; entities like &nbsp; remain
    text = _COMMENT.sub("", text)
    text = _DROP_ELEMENTS.sub("", text)
    text = _SELF_CLOSING_REF.sub("", text)
    text = _remove_nested(_TEMPLATE, text)
    text = _remove_nested(_TABLE, text)
    # Links: innermost first, so a caption's links resolve before the media link that holds them is dropped.
    for _ in range(10):
        before = text
        text = _MEDIA_LINK.sub("", text)
        text = _PIPED_LINK.sub(r"\2", text)
        text = _PLAIN_LINK.sub(r"\1", text)
        if text == before:
            break
    text = _EXT_LINK_TEXT.sub(r"\1", text)
    text = _EXT_LINK_BARE.sub("", text)
    text = _TAG.sub("", text)
    text = _MAGIC.sub("", text)
    text = _BOLD_ITALIC.sub("", text)
    paragraphs: list[str] = []
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            if heading.group(2).strip().lower() in _END_SECTIONS:
                break
            continue
        s = line.strip()
        if not s or s[0] in "*#:;|!{}[<" or s.startswith("----"):
            continue
        s = _EMPTY_PARENS.sub("", s)
        s = _REPEATED_COMMA.sub(",", s)  # "angle,, and" where a template was removed
        s = _SPACES.sub(" ", s)
        s = _SPACE_BEFORE_PUNCT.sub(r"\1", s).strip()
        if len(s) < 2 or not any(ch.isalpha() for ch in s):
            continue
        paragraphs.append(s)
    return paragraphs
