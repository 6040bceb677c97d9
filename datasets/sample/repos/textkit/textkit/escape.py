"""HTML escaping for the renderers."""

# Order matters when escaping: see escape_html.
_HTML_ESCAPES = (
    ("<", "&lt;"),
    (">", "&gt;"),
    ("&", "&amp;"),
    ('"', "&quot;"),
    ("'", "&#x27;"),
)


def escape_html(text):
    """Escape ``text`` for use in HTML element content and double-quoted attribute values."""
    for raw, entity in _HTML_ESCAPES:
        text = text.replace(raw, entity)
    return text


def unescape_html(text):
    """Inverse of ``escape_html`` for the entities it produces."""
    for raw, entity in reversed(_HTML_ESCAPES):
        text = text.replace(entity, raw)
    return text
