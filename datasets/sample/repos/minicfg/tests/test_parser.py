import pytest

from minicfg.errors import ParseError
from minicfg.parser import parse_ini

SAMPLE = """
# service settings
[DEFAULT]
timeout = 30

[server]
Host = example.org
port: 8080
banner = first line
  second line

; comment
[Database Main]
url = postgres://db/main
"""


def test_parse_sections_and_lowercase_keys():
    data = parse_ini(SAMPLE)
    assert data["server"]["host"] == "example.org"
    assert data["server"]["port"] == "8080"
    assert data["Database Main"]["url"] == "postgres://db/main"


def test_continuation_lines_are_joined():
    assert parse_ini(SAMPLE)["server"]["banner"] == "first line\nsecond line"


def test_option_before_section_is_an_error():
    with pytest.raises(ParseError, match="line 1"):
        parse_ini("key = value\n[s]\n")


def test_garbage_line_reports_source_and_line():
    with pytest.raises(ParseError, match=r"app\.ini, line 3"):
        parse_ini("[s]\na = 1\nnot an option\n", source="app.ini")
