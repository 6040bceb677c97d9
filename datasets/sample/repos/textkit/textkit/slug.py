"""URL slugs."""

import re

from textkit.normalize import normalize

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text, sep="-", max_length=None):
    """Turn ``text`` into a lowercase ASCII slug: ``"Hello, World!"`` -> ``"hello-world"``.

    When ``max_length`` is given the slug is cut to at most that many characters, never ending on ``sep``.
    """
    slug = _NON_ALNUM.sub(sep, normalize(text)).strip(sep)
    if max_length is not None and len(slug) > max_length:
        slug = slug[:max_length].rstrip(sep)
    return slug


def unique_slug(text, taken, sep="-"):
    """Slug of ``text`` that is not in ``taken``, adding ``-2``, ``-3``... as needed."""
    base = slugify(text, sep=sep)
    if base not in taken:
        return base
    counter = 2
    while f"{base}{sep}{counter}" in taken:
        counter += 1
    return f"{base}{sep}{counter}"
