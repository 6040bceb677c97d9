import pytest

from minicfg.errors import InterpolationError
from minicfg.interpolate import interpolate

DATA = {
    "DEFAULT": {"root": "/srv"},
    "paths": {"data": "${root}/data", "logs": "${data}/logs"},
    "db": {"file": "${paths:data}/app.db"},
}


def test_reference_to_default():
    assert interpolate("${root}/www", "paths", DATA) == "/srv/www"


def test_nested_references():
    assert interpolate(DATA["paths"]["logs"], "paths", DATA) == "/srv/data/logs"


def test_cross_section_reference():
    assert interpolate(DATA["db"]["file"], "db", DATA) == "/srv/data/app.db"


def test_env_reference():
    assert interpolate("${env:HOME_DIR}/x", "paths", DATA, environ={"HOME_DIR": "/home/u"}) == "/home/u/x"


def test_missing_reference_names_section():
    with pytest.raises(InterpolationError, match=r"\[paths\]"):
        interpolate("${nope}", "paths", DATA)


def test_reference_cycle_is_detected():
    data = {"s": {"a": "${b}", "b": "${a}"}}
    with pytest.raises(InterpolationError, match="nested deeper"):
        interpolate("${a}", "s", data)
