"""A read-only view of one section: values of the section, falling back to [DEFAULT], interpolated."""

from collections.abc import Mapping

from minicfg.errors import MissingKeyError
from minicfg.interpolate import interpolate
from minicfg.parser import DEFAULT_SECTION


class Section(Mapping):
    """``config["server"]["port"]``: interpolated values of one section of ``data``."""

    def __init__(self, name, data, environ=None):
        self.name = name
        self._data = data
        self._environ = environ

    def _raw(self, key):
        for candidate in (self.name, DEFAULT_SECTION):
            values = self._data.get(candidate, {})
            if key in values:
                return values[key]
        raise MissingKeyError(self.name, key)

    def __getitem__(self, key):
        return interpolate(self._raw(key), self.name, self._data, self._environ)

    def raw(self, key):
        """The value as written, without interpolation."""
        return self._raw(key)

    def __iter__(self):
        keys = dict.fromkeys(self._data.get(DEFAULT_SECTION, {}))
        keys.update(dict.fromkeys(self._data.get(self.name, {})))
        return iter(sorted(keys))

    def __len__(self):
        return sum(1 for _ in self)

    def __repr__(self):
        return f"<Section [{self.name}] {sorted(self)}>"
