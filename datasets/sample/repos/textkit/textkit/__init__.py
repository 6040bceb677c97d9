"""textkit: small text utilities (normalisation, slugs, wrapping, pagination, a tiny markup renderer)."""

from textkit.errors import PageNotFound, TextkitError
from textkit.escape import escape_html, unescape_html
from textkit.markup import HtmlRenderer, PlainRenderer, Renderer, render
from textkit.normalize import collapse_whitespace, normalize, strip_accents
from textkit.paginate import Page, Paginator
from textkit.slug import slugify, unique_slug
from textkit.wrap import fill, truncate, wrap

__version__ = "0.4.1"

__all__ = [
    "HtmlRenderer",
    "Page",
    "PageNotFound",
    "Paginator",
    "PlainRenderer",
    "Renderer",
    "TextkitError",
    "collapse_whitespace",
    "escape_html",
    "fill",
    "normalize",
    "render",
    "slugify",
    "strip_accents",
    "truncate",
    "unescape_html",
    "unique_slug",
    "wrap",
]
