"""Exceptions raised by textkit."""


class TextkitError(Exception):
    """Base class of every error raised by textkit."""


class PageNotFound(TextkitError, LookupError):
    """A page number outside ``1..num_pages`` was requested."""

    def __init__(self, number, num_pages):
        super().__init__(f"page {number} does not exist (valid pages: 1..{num_pages})")
        self.number = number
        self.num_pages = num_pages


class MarkupError(TextkitError, ValueError):
    """The inline markup could not be parsed (e.g. an unclosed code span)."""
