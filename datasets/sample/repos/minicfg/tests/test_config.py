import pytest

from minicfg.config import Config
from minicfg.errors import MissingKeyError
from minicfg.sources import DictSource, EnvSource, FileSource


def test_later_sources_override_earlier():
    config = Config([DictSource({"server": {"port": 80, "host": "a"}}), DictSource({"server": {"port": 8080}})])
    assert config.get_int("server", "port") == 8080
    assert config.get("server", "host") == "a"


def test_default_section_fallback():
    config = Config([DictSource({"DEFAULT": {"debug": "no"}, "worker": {}})])
    assert config.get_bool("worker", "debug") is False
    assert config.has_option("worker", "debug")


def test_missing_key_and_default():
    config = Config([DictSource({"server": {}})])
    with pytest.raises(MissingKeyError, match="no option 'port'"):
        config.get("server", "port")
    assert config.get_int("server", "port", default=80) == 80


def test_file_source_with_env_override(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[server]\nport = 8080\ntimeout = 1m\n", encoding="utf-8")
    config = Config([FileSource(path), EnvSource("MYAPP_", environ={"MYAPP_SERVER_PORT": "9090"})])
    assert config.get_int("server", "port") == 9090
    assert config.get_duration("server", "timeout") == 60.0


def test_missing_optional_file_is_empty(tmp_path):
    config = Config([FileSource(tmp_path / "absent.ini", optional=True)])
    assert config.sections() == []


def test_section_mapping_lists_keys_with_defaults():
    config = Config([DictSource({"DEFAULT": {"a": 1}, "s": {"b": 2}})])
    assert dict(config["s"]) == {"a": "1", "b": "2"}
