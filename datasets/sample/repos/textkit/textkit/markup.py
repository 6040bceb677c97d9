"""Renderers for the inline syntax tree of ``textkit.inline``."""

from textkit.escape import escape_html
from textkit.inline import Code, Emphasis, Link, Strong, Text, parse_inline
from textkit.normalize import collapse_whitespace


class Renderer:
    """Walks the inline tree; subclasses decide how each node kind is written."""

    def render(self, text):
        """Render one paragraph of inline markup (whitespace is collapsed first)."""
        return self.render_nodes(parse_inline(collapse_whitespace(text)))

    def render_nodes(self, nodes):
        return "".join(self.render_node(node) for node in nodes)

    def render_node(self, node):
        if isinstance(node, Text):
            return self.text(node.text)
        if isinstance(node, Code):
            return self.code(node.text)
        if isinstance(node, Strong):
            return self.strong(self.render_nodes(node.children))
        if isinstance(node, Emphasis):
            return self.emphasis(self.render_nodes(node.children))
        if isinstance(node, Link):
            return self.link(self.render_nodes(node.children), node.url)
        raise TypeError(f"unknown node type {type(node).__name__}")

    def text(self, text):
        raise NotImplementedError

    def code(self, text):
        raise NotImplementedError

    def strong(self, content):
        raise NotImplementedError

    def emphasis(self, content):
        raise NotImplementedError

    def link(self, content, url):
        raise NotImplementedError


class HtmlRenderer(Renderer):
    """HTML output; text and attribute values are escaped."""

    def text(self, text):
        return escape_html(text)

    def code(self, text):
        return f"<code>{escape_html(text)}</code>"

    def strong(self, content):
        return f"<strong>{content}</strong>"

    def emphasis(self, content):
        return f"<em>{content}</em>"

    def link(self, content, url):
        return f'<a href="{escape_html(url)}">{content}</a>'


class PlainRenderer(Renderer):
    """Plain text output: markup is dropped, link targets are kept in parentheses."""

    def text(self, text):
        return text

    def code(self, text):
        return text

    def strong(self, content):
        return content

    def emphasis(self, content):
        return content

    def link(self, content, url):
        return f"{content} ({url})"


_RENDERERS = {"html": HtmlRenderer, "plain": PlainRenderer}


def render(text, fmt="html"):
    """Render ``text`` with the renderer registered for ``fmt`` (``"html"`` or ``"plain"``)."""
    try:
        renderer_class = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(_RENDERERS)}") from None
    return renderer_class().render(text)
