"""Config mistakes get short errors a user can act on: a misspelt key names the closest real keys, a rule names its
keys without dumping the whole config back at the user."""

from __future__ import annotations

import pytest

from graph_planner.config.loader import ConfigError, load_run_config


def _error(overrides: dict) -> str:
    with pytest.raises(ConfigError) as info:
        load_run_config(cli_overrides=overrides, write=False)
    return str(info.value)


def test_misspelt_key_suggests_the_real_one() -> None:
    message = _error({"training.totl_steps": 3})
    assert "training.totl_steps: unknown key; did you mean training.total_steps" in message


def test_misspelt_section_suggests_the_real_one() -> None:
    assert "trainng: unknown key; did you mean training?" in _error({"trainng.total_steps": 3})


def test_key_with_no_close_match_is_just_unknown() -> None:
    message = _error({"training.zzzzqqq": 1})
    assert "training.zzzzqqq: unknown key" in message and "did you mean" not in message


def test_config_level_rule_is_short_and_does_not_dump_the_config() -> None:
    message = _error({"logging.track_with": ["foo"]})
    assert "unknown tracker(s) ['foo']" in message
    assert "got {" not in message and "'training'" not in message
    assert len(message.splitlines()) == 2


def test_bad_value_shows_the_value_given() -> None:
    assert "training.total_steps:" in (m := _error({"training.total_steps": "abc"})) and "(got 'abc')" in m
