"""A small multi-module package for the code-graph tests (inheritance across modules, relative imports, nested
functions, module/class attributes, calls through imports). Imported by test_codegraph_*; holds no tests."""

from __future__ import annotations

BASE = '''"""Base shapes."""

DEFAULT_NAME = "shape"


class Shape:
    """A named shape."""

    sides: int = 0

    def __init__(self, name=DEFAULT_NAME):
        self.name = name

    def describe(self):
        return self.label()

    def label(self):
        return self.name.upper()
'''

SHAPES = '''from .base import Shape as BaseShape
from . import util
from pkg.util import clamp
import os.path


class Square(BaseShape):
    """A square."""

    def __init__(self, side):
        super().__init__("square")
        self.side = clamp(side)

    def area(self):
        def squared(x):
            return x * x

        return squared(self.side)

    def describe(self):
        return self.label() + util.fmt(self.area())


def area_of(shape):
    return shape.area()


def missing():
    return os.path.join("a", "b") + undefined_helper() + len("x")
'''

UTIL = '''def clamp(value, low=0):
    return max(low, value)


def fmt(x):
    return f"{x:.2f}"
'''

DEEP = '''from ..shapes import Square
from ...nowhere import thing


class Cube(Square):
    pass


def make():
    return Cube(2)
'''

TEST_SHAPES = '''from pkg.shapes import Square


def test_area():
    assert Square(2).area() == 4
'''


def package_files() -> dict[str, str]:
    return {
        "pkg/__init__.py": "from .shapes import Square, area_of\n",
        "pkg/base.py": BASE,
        "pkg/shapes.py": SHAPES,
        "pkg/util.py": UTIL,
        "pkg/sub/__init__.py": "",
        "pkg/sub/deep.py": DEEP,
        "tests/test_shapes.py": TEST_SHAPES,
        "README.md": "# Shapes\n\nGeometry helpers.\n",
        "setup.cfg": "[metadata]\nname = pkg\n",
        "data/blob.bin": "ignored: not source, not docs",
    }


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")
