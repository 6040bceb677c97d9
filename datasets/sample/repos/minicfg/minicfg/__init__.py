"""minicfg: layered INI + environment configuration with interpolation and typed getters."""

from minicfg.config import Config
from minicfg.errors import CoercionError, ConfigError, InterpolationError, MissingKeyError, ParseError
from minicfg.parser import parse_ini
from minicfg.section import Section
from minicfg.sources import DictSource, EnvSource, FileSource, Source

__version__ = "0.9.3"

__all__ = [
    "CoercionError",
    "Config",
    "ConfigError",
    "DictSource",
    "EnvSource",
    "FileSource",
    "InterpolationError",
    "MissingKeyError",
    "ParseError",
    "Section",
    "Source",
    "parse_ini",
]
