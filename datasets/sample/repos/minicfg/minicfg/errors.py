"""Exceptions raised by minicfg."""


class ConfigError(Exception):
    """Base class of every error raised by minicfg."""


class ParseError(ConfigError):
    """A line of an INI file could not be parsed."""

    def __init__(self, source, lineno, line, reason):
        super().__init__(f"{source}, line {lineno}: {reason}: {line!r}")
        self.source = source
        self.lineno = lineno
        self.line = line


class MissingKeyError(ConfigError, KeyError):
    """The key is neither in the section nor in [DEFAULT]."""

    def __init__(self, section, key):
        super().__init__(f"no option {key!r} in section [{section}] (nor in [DEFAULT])")
        self.section = section
        self.key = key

    def __str__(self):
        return self.args[0]


class InterpolationError(ConfigError):
    """A ${...} reference could not be resolved, or references loop."""


class CoercionError(ConfigError, ValueError):
    """A value could not be converted to the requested type."""
