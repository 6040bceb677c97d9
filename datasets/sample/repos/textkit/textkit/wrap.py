"""Word wrapping and truncation."""

from textkit.normalize import collapse_whitespace


def wrap(text, width=70):
    """Greedy word wrap of ``text`` into lines of at most ``width`` characters.

    Whitespace is collapsed first; words longer than ``width`` are split across lines.
    """
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    lines = []
    current = ""
    for word in collapse_whitespace(text).split(" "):
        if not word:
            continue
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current = f"{current} {word}"
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text, width=70):
    """``wrap`` joined with newlines."""
    return "\n".join(wrap(text, width))


def truncate(text, length, ellipsis="..."):
    """Shorten ``text`` to at most ``length`` characters, marking the cut with ``ellipsis``.

    Text that already fits is returned unchanged.
    """
    if length < len(ellipsis):
        raise ValueError(f"length {length} is shorter than the ellipsis {ellipsis!r}")
    if len(text) <= length:
        return text
    return text[:length].rstrip() + ellipsis
