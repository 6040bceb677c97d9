"""INI parsing: ``[section]`` headers, ``key = value`` or ``key: value`` lines, comments, continuations."""

import re

from minicfg.errors import ParseError

DEFAULT_SECTION = "DEFAULT"
_SECTION = re.compile(r"^\[(?P<name>[^\[\]]+)\]$")
_OPTION = re.compile(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$")


def normalize_key(key):
    """Option names are case-insensitive and stored lower case (as in configparser)."""
    return key.strip().lower()


def parse_ini(text, source="<string>"):
    """Parse INI ``text`` into ``{section: {key: value}}``; ``source`` names the input in errors.

    Lines starting with ``#`` or ``;`` are comments. An indented line continues the previous value.
    """
    sections = {}
    current = None
    last_key = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if raw[0].isspace() and last_key is not None:
            current[last_key] = f"{current[last_key]}\n{stripped}".strip()
            continue
        header = _SECTION.match(stripped)
        if header:
            name = header.group("name").strip()
            current = sections.setdefault(name, {})
            last_key = None
            continue
        option = _OPTION.match(stripped)
        if not option:
            raise ParseError(source, lineno, raw, "expected [section] or key = value")
        if current is None:
            raise ParseError(source, lineno, raw, "option before any [section] header")
        last_key = normalize_key(option.group("key"))
        current[last_key] = option.group("value").strip()
    return sections
