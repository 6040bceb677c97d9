"""Where configuration values come from. Each source loads ``{section: {key: value}}``."""

import os
from pathlib import Path

from minicfg.errors import ConfigError
from minicfg.parser import normalize_key, parse_ini


class Source:
    """Base class: ``load()`` returns ``{section: {key: value}}`` with lower-case keys."""

    name = "source"

    def load(self):
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class DictSource(Source):
    """Values given in code, e.g. defaults shipped with an application."""

    name = "dict"

    def __init__(self, data):
        self._data = {section: {normalize_key(k): str(v) for k, v in values.items()}
                      for section, values in data.items()}

    def load(self):
        return {section: dict(values) for section, values in self._data.items()}


class FileSource(Source):
    """An INI file. A missing file is an error unless ``optional=True``."""

    def __init__(self, path, optional=False):
        self.path = Path(path)
        self.optional = optional
        self.name = str(self.path)

    def load(self):
        if not self.path.exists():
            if self.optional:
                return {}
            raise ConfigError(f"config file {self.path} does not exist")
        return parse_ini(self.path.read_text(encoding="utf-8"), source=str(self.path))


class EnvSource(Source):
    """Environment variables ``<PREFIX><SECTION>_<KEY>``: ``APP_SERVER_PORT=8080`` sets ``[server] port``.

    Section names are lower-cased; everything after the first underscore following the section is the key.
    """

    def __init__(self, prefix="APP_", environ=None):
        if not prefix:
            raise ValueError("an EnvSource needs a non-empty prefix, e.g. 'APP_'")
        self.prefix = prefix
        self.environ = os.environ if environ is None else environ
        self.name = f"env:{prefix}*"

    def load(self):
        data = {}
        for name, value in sorted(self.environ.items()):
            if not name.startswith(self.prefix):
                continue
            parts = name[len(self.prefix):].lower().split("_")
            if len(parts) != 2:
                continue
            section, key = parts
            data.setdefault(section, {})[normalize_key(key)] = value
        return data
