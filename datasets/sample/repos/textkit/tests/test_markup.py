import pytest

from textkit.errors import MarkupError
from textkit.inline import Code, Emphasis, Strong, Text, parse_inline
from textkit.markup import HtmlRenderer, PlainRenderer, render


def test_parse_inline_nodes():
    assert parse_inline("a **b** _c_ `d`") == [
        Text("a "), Strong([Text("b")]), Text(" "), Emphasis([Text("c")]), Text(" "), Code("d"),
    ]


def test_underscores_inside_identifiers_are_not_emphasis():
    assert render("call my_func_name now") == "call my_func_name now"


def test_html_renderer_strong_and_link():
    html = HtmlRenderer().render("see **the docs** at [site](https://example.org/docs)")
    assert html == 'see <strong>the docs</strong> at <a href="https://example.org/docs">site</a>'


def test_plain_renderer_keeps_link_target():
    assert PlainRenderer().render("read [this](https://example.org)") == "read this (https://example.org)"


def test_render_escapes_ampersand_in_text():
    assert render("R&D **team**") == "R&amp;D <strong>team</strong>"


def test_render_unknown_format():
    with pytest.raises(ValueError, match="unknown format"):
        render("x", fmt="rtf")


def test_unclosed_code_span_is_an_error():
    with pytest.raises(MarkupError):
        parse_inline("use `pip install")
