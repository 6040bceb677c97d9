"""Parser for textkit's inline markup: ``**strong**``, ``_emphasis_``, `` `code` `` and ``[label](url)``."""

import re
from dataclasses import dataclass, field

from textkit.errors import MarkupError


@dataclass
class Node:
    """Base class of the inline syntax tree."""


@dataclass
class Text(Node):
    text: str


@dataclass
class Code(Node):
    text: str


@dataclass
class Container(Node):
    """A node whose content is itself inline markup."""

    children: list = field(default_factory=list)


@dataclass
class Strong(Container):
    pass


@dataclass
class Emphasis(Container):
    pass


@dataclass
class Link(Container):
    url: str = ""


# Alternatives are tried left to right at each position; code spans first so their content stays literal.
_TOKEN = re.compile(
    r"`(?P<code>[^`]*)`"
    r"|\*\*(?P<strong>.+?)\*\*"
    r"|(?<![\w_])_(?P<em>[^_]+?)_(?![\w_])"
    r"|\[(?P<label>[^\]]+)\]\((?P<url>[^)\s]+)\)"
)


def parse_inline(text):
    """Parse ``text`` into a list of nodes. Raises MarkupError for an unclosed code span."""
    nodes = []
    position = 0
    for match in _TOKEN.finditer(text):
        if match.start() > position:
            nodes.append(Text(text[position:match.start()]))
        if match.group("code") is not None:
            nodes.append(Code(match.group("code")))
        elif match.group("strong") is not None:
            nodes.append(Strong(parse_inline(match.group("strong"))))
        elif match.group("em") is not None:
            nodes.append(Emphasis(parse_inline(match.group("em"))))
        else:
            nodes.append(Link(parse_inline(match.group("label")), url=match.group("url")))
        position = match.end()
    rest = text[position:]
    if rest.count("`") % 2:
        raise MarkupError(f"unclosed code span in {text!r}")
    if rest:
        nodes.append(Text(rest))
    return nodes
