"""Read a local W&B run file (``wandb/offline-run-*/run-*.wandb``) back: config, history rows, summary.

wandb >= 0.2x dropped its Python reader (``wandb.sdk.internal.datastore``); the file is still W&B's LevelDB-style
record log (7-byte ``:W&B`` header, 32 KiB blocks, records framed by zlib crc32 + length + type) holding
``wandb_internal_pb2.Record`` protobufs, which the installed wandb package still ships. Used to check what an
offline run holds before ``wandb sync``, and by the tests.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_BLOCK = 32 * 1024
_RECORD_HEADER = 7  # crc32 (4) + length (2) + type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    """The run file is not a W&B record log or is corrupt; the message names the file and byte offset."""


@dataclass
class OfflineRun:
    """What a run file holds: merged config, one dict per history row (with ``_step``), final summary."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    complete: bool = False  # the exit record is there: wandb has finished writing the run
    name: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # name, type, files (paths inside it)

    def metric(self, key: str) -> list[tuple[int, Any]]:
        """(step, value) pairs of one metric across history rows."""
        return [(row.get("_step", i), row[key]) for i, row in enumerate(self.history) if key in row]


def iter_record_bytes(path: str | Path) -> Iterator[bytes]:
    """Yield each record payload, checking framing and CRC; a torn tail (run still writing) ends the scan."""
    path = Path(path)
    data = path.read_bytes()
    if not data.startswith(_HEADER):
        raise WandbFileError(f"{path}: not a W&B run file (header {data[:7]!r}, expected {_HEADER!r})")
    pos, pending = len(_HEADER), b""
    while pos + _RECORD_HEADER <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < _RECORD_HEADER:  # block trailer is zero padding
            pos += room
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        start = pos + _RECORD_HEADER
        chunk = data[start : start + length]
        if kind == 0 and length == 0:  # zero fill: the writer stopped here
            break
        if len(chunk) < length:
            break
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise WandbFileError(f"{path}: CRC mismatch in record at byte {pos}")
        pos = start + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""
        else:
            raise WandbFileError(f"{path}: unknown record type {kind} at byte {pos}")


def _history_value(item: Any) -> Any:
    which = item.WhichOneof("value")
    if which is None or which == "none":
        return json.loads(item.value_json) if item.value_json else None
    if which == "json":
        return json.loads(item.json)
    return getattr(item, which)


def _assign(target: dict[str, Any], item: Any, value: Any) -> None:
    """wandb flattens nested values (histograms, dict metrics) into ``nested_key`` paths; rebuild the dicts."""
    if item.key:
        target[item.key] = value
        return
    *parents, last = item.nested_key
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _config_value(value_json: str) -> Any:
    value = json.loads(value_json)
    # wandb stores each top-level key as {"value": ..., "desc": ...}
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def read_offline_run(path: str | Path) -> OfflineRun:
    """Parse a ``run-*.wandb`` file, or the single one inside a run directory / ``wandb/`` directory."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("run-*.wandb"))
        if len(files) != 1:
            raise WandbFileError(f"{path}: expected one run-*.wandb file below it, found {len(files)}: {files}")
        path = files[0]
    run = OfflineRun(path=path)
    for raw in iter_record_bytes(path):
        record = pb.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            for item in record.run.config.update:
                _assign(run.config, item, _config_value(item.value_json))
            run.name, run.group, run.job_type = record.run.display_name, record.run.run_group, record.run.job_type
            run.tags = list(record.run.tags)
        elif kind == "artifact":
            run.artifacts.append({"name": record.artifact.name, "type": record.artifact.type,
                                  "files": [entry.path for entry in record.artifact.manifest.contents]})
        elif kind == "config":
            for item in record.config.update:
                _assign(run.config, item, _config_value(item.value_json))
            for item in record.config.remove:
                *parents, last = [item.key] if item.key else list(item.nested_key)
                node = run.config
                for part in parents:
                    node = node.get(part, {})
                node.pop(last, None)
        elif kind == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                _assign(row, item, _history_value(item))
            run.history.append(row)
        elif kind == "exit":
            run.complete = True
        elif kind == "summary":
            for item in record.summary.update:
                _assign(run.summary, item, json.loads(item.value_json))
    return run


def wait_for_complete_run(path: str | Path, timeout_s: float = 30.0, poll_s: float = 0.05) -> bool:
    """Wait until wandb's service has flushed the run file up to its exit record (it writes asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if read_offline_run(path).complete:
                return True
        except (OSError, WandbFileError):
            pass  # not created yet, or a record half written
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
