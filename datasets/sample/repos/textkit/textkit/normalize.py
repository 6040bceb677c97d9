"""Text normalisation shared by slugs, wrapping and the renderers."""

import re
import unicodedata

_WHITESPACE = re.compile(r"\s+")


def strip_accents(text):
    """Remove combining marks: ``"Crème brûlée"`` -> ``"Creme brulee"``."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def collapse_whitespace(text):
    """Replace every run of whitespace (newlines and tabs included) by one space and trim the ends."""
    return _WHITESPACE.sub(" ", text).strip()


def normalize(text, *, lower=True, accents=False):
    """Collapse whitespace, optionally fold case and strip accents.

    ``accents=False`` (the default) removes accents, which is what slugs and search keys want.
    """
    text = collapse_whitespace(text)
    if not accents:
        text = strip_accents(text)
    if lower:
        text = text.casefold()
    return text
