"""``Config``: layered sources (later ones win), [DEFAULT] fallback, interpolation and typed getters."""

from minicfg import coerce
from minicfg.errors import MissingKeyError
from minicfg.parser import DEFAULT_SECTION
from minicfg.section import Section
from minicfg.sources import EnvSource, FileSource

_MISSING = object()


class Config:
    def __init__(self, sources=(), environ=None):
        self.sources = list(sources)
        self._environ = environ
        self._data = {}
        self.reload()

    @classmethod
    def from_file(cls, path, env_prefix=None, optional=False):
        """Config from one INI file, optionally overridden by ``<env_prefix>SECTION_KEY`` variables."""
        sources = [FileSource(path, optional=optional)]
        if env_prefix:
            sources.append(EnvSource(env_prefix))
        return cls(sources)

    def reload(self):
        """Load every source again, later sources overriding earlier ones key by key."""
        merged = {}
        for source in self.sources:
            for section, values in source.load().items():
                merged.setdefault(section, {}).update(values)
        self._data = merged

    def sections(self):
        """Section names (without DEFAULT), sorted."""
        return sorted(name for name in self._data if name != DEFAULT_SECTION)

    def has_section(self, name):
        return name in self._data

    def has_option(self, section, key):
        return key in self._data.get(section, {}) or key in self._data.get(DEFAULT_SECTION, {})

    def section(self, name):
        return Section(name, self._data, self._environ)

    def __getitem__(self, name):
        if name not in self._data:
            raise KeyError(f"no section [{name}]")
        return self.section(name)

    def get(self, section, key, default=_MISSING):
        """Interpolated value of ``key`` in ``section`` (or [DEFAULT]); ``default`` if given and missing."""
        try:
            return self.section(section)[key]
        except MissingKeyError:
            if default is _MISSING:
                raise
            return default

    def _typed(self, convert, section, key, default):
        value = self.get(section, key, default=_MISSING if default is _MISSING else None)
        if value is None:
            return default
        return convert(value)

    def get_bool(self, section, key, default=_MISSING):
        return self._typed(coerce.to_bool, section, key, default)

    def get_int(self, section, key, default=_MISSING):
        return self._typed(coerce.to_int, section, key, default)

    def get_float(self, section, key, default=_MISSING):
        return self._typed(coerce.to_float, section, key, default)

    def get_list(self, section, key, default=_MISSING):
        return self._typed(coerce.to_list, section, key, default)

    def get_duration(self, section, key, default=_MISSING):
        return self._typed(coerce.to_duration, section, key, default)
