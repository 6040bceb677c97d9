"""Turn a test run's log into {test_id: status} with the `swebench` package's own parsers (pytest -rA lines,
django, ...), never keyword heuristics; plus R2E's path-less test keys."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

Parser = Callable[..., dict[str, str]]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[\d+m")


@lru_cache(maxsize=1)
def _registry() -> dict[str, Parser]:
    """Parser name -> function: swebench 5.x PARSER_REGISTRY, or the module's parse_log_* functions on 4.x."""
    from graph_planner.imports import import_lock

    with import_lock():  # slow import (docker, modal, datasets): only when grading, maybe in episode threads
        from swebench.harness import log_parsers

    registry = getattr(log_parsers, "PARSER_REGISTRY", None)
    if isinstance(registry, dict):
        return dict(registry)
    return {attr: getattr(log_parsers, attr) for attr in dir(log_parsers) if attr.startswith("parse_log_")}


def parser_names() -> list[str]:
    """Short names accepted as TaskRecord.log_parser (e.g. 'pytest', 'pytest_v2', 'django')."""
    return sorted(name.removeprefix("parse_log_") for name in _registry())


def get_parser(parser_name: str) -> Parser:
    """The swebench parser for ``parser_name`` ('pytest' or 'parse_log_pytest'); unknown names are errors."""
    key = parser_name if parser_name.startswith("parse_log_") else f"parse_log_{parser_name}"
    parser = _registry().get(key)
    if parser is None:
        raise ValueError(
            f"unknown log parser {parser_name!r}; the installed swebench knows: {', '.join(parser_names())}"
        )
    return parser


def parse_test_log(log: str, parser_name: str = "pytest") -> dict[str, str]:
    """Per-test statuses (PASSED, FAILED, SKIPPED, ERROR, XFAIL) parsed from a test command's output.

    The Python parsers never read their ``test_spec`` argument, so None is passed.
    """
    return dict(get_parser(parser_name)(log, None))


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def r2e_key(test_id: str) -> str:
    """R2E-Gym's key for a test: drop the file path, join the `::` parts with '.', cut at the first ' - ',
    strip ANSI (`r2e_tests/test_1.py::TestX::test_a` → `TestX.test_a`). A file-level id has an empty key,
    exactly as R2E's parser produced the expected outputs."""
    text = strip_ansi(test_id).strip()
    key = ".".join(text.split("::")[1:])
    return key.split(" - ", 1)[0].strip()
