"""Register prepared TaskRecord JSONL as verl parquet (and optionally rLLM's ``<split>_verl.parquet`` layout).

verl row: ``data_source`` ("graph_planner/<source>"), ``prompt`` (system + user chat messages built from the
agent-visible fields only), ``ability`` "swe", ``reward_model`` {style: rule, ground_truth: task_id},
``extra_info`` {index, split, task: the full TaskRecord as JSON, read by the agent loop to start the sandbox and
grade}, ``agent_name``. ``<out>/registry.json`` indexes {name: {split: {path, rows, content_sha256, rllm_path}}};
re-registering the same input bytes is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from graph_planner.config.paths import parquet_path
from graph_planner.data.io import read_task_records, write_json
from graph_planner.data.record import TaskRecord

#: Bumped whenever the row layout below changes, so old registrations are rewritten, not reused.
ROW_FORMAT_VERSION = 1
AGENT_NAME = "graph_planner_agent"
ABILITY = "swe"
REGISTRY_FILE = "registry.json"
SYSTEM_PROMPT = (
    "You are Graph Planner, an agent that repairs a software repository. You explore the repository's code "
    "graph, keep the relevant evidence in memory, ask the patch synthesiser for a repair and submit it when the "
    "issue is fixed. Reply with exactly one action per turn."
)

VERL_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([("index", pa.int64()), ("split", pa.string()), ("task", pa.string())])),
    ("agent_name", pa.string()),
])
RLLM_ROW_SCHEMA = pa.schema([("task_id", pa.string()), ("data_source", pa.string()), ("task", pa.string())])
RLLM_VERL_SCHEMA = pa.schema([
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct(list(RLLM_ROW_SCHEMA))),
])


class RegistrationError(ValueError):
    """The input cannot be registered (no records, bad name); the message names the input."""


class RegisterResult(BaseModel):
    name: str
    split: str
    path: str = Field(description="verl parquet (absolute).")
    rows: int
    content_sha256: str
    changed: bool = Field(description="False when the same input was already registered (nothing rewritten).")
    rllm_path: str | None = Field(None, description="rLLM <split>_verl.parquet (absolute), when requested.")


def task_prompt(record: TaskRecord) -> list[dict[str, str]]:
    """The initial chat: a system message and the issue. Built from ``agent_view()``: never grading data."""
    view = record.agent_view()
    user = (
        f"Repository: {view['repo']} (checked out at {view['workdir']})\n"
        f"Task: {view['task_id']}\n"
        f"Step budget: {view['max_steps']}\n\n"
        f"Issue:\n{view['problem_statement']}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def verl_row(record: TaskRecord, index: int, split: str) -> dict[str, Any]:
    return {
        "data_source": f"graph_planner/{record.source}",
        "prompt": task_prompt(record),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": record.task_id},
        "extra_info": {"index": index, "split": split, "task": record.model_dump_json()},
        "agent_name": AGENT_NAME,
    }


def rllm_row(record: TaskRecord) -> dict[str, Any]:
    """What rLLM's DatasetRegistry would store for our task: the id plus the TaskRecord for the env's from_dict."""
    return {"task_id": record.task_id, "data_source": f"graph_planner/{record.source}", "task": record.model_dump_json()}


def content_sha256(paths: Sequence[Path]) -> str:
    """Hash of the input bytes (in order) and the row format: equal hash = identical registered output."""
    digest = hashlib.sha256(f"graph_planner-registry-v{ROW_FORMAT_VERSION}\n".encode())
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def load_registry(out_dir: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    path = Path(out_dir) / REGISTRY_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RegistrationError(f"{path}: not valid JSON ({exc.msg}); delete it to re-register") from None
    return data if isinstance(data, dict) else {}


def register_dataset(
    jsonl_paths: str | Path | Sequence[str | Path],
    name: str,
    out_dir: str | Path,
    split: str,
    rllm_layout: bool = False,
) -> RegisterResult:
    """Write ``<out_dir>/<name>/<split>.parquet`` (and ``<out_dir>/rllm/<name>/<split>_verl.parquet``).

    Unchanged input (same sha256) with the outputs present is a no-op: ``changed=False``, files untouched.
    """
    paths = [Path(p) for p in ([jsonl_paths] if isinstance(jsonl_paths, (str, Path)) else jsonl_paths)]
    if not paths:
        raise RegistrationError("no input JSONL given")
    for label, value in (("name", name), ("split", split)):
        if not value or "/" in value or value.startswith("."):
            raise RegistrationError(f"invalid dataset {label} {value!r}: use a plain name like 'graph_planner'")
    out = Path(out_dir)
    sha = content_sha256(paths)
    verl_path = parquet_path(out, name, split)
    rllm_path = out / "rllm" / name / f"{split}_verl.parquet"
    registry = load_registry(out)
    entry = registry.get(name, {}).get(split)
    if entry and entry.get("content_sha256") == sha and verl_path.is_file() and (
        not rllm_layout or (entry.get("rllm_path") and rllm_path.is_file())
    ):
        return RegisterResult(name=name, split=split, path=str(verl_path), rows=int(entry["rows"]),
                              content_sha256=sha, changed=False,
                              rllm_path=str(rllm_path) if entry.get("rllm_path") else None)
    records = [r for p in paths for r in read_task_records(p)]
    if not records:
        raise RegistrationError(f"no TaskRecords in {', '.join(map(str, paths))}: nothing to register")
    _write_parquet(verl_path, [verl_row(r, i, split) for i, r in enumerate(records)], VERL_SCHEMA)
    if rllm_layout:
        rows = [rllm_row(r) for r in records]
        _write_parquet(rllm_path.with_name(f"{split}.parquet"), rows, RLLM_ROW_SCHEMA)
        _write_parquet(rllm_path, [_rllm_verl_row(row) for row in rows], RLLM_VERL_SCHEMA)
        _register_with_rllm(name, split, rows)
    registry.setdefault(name, {})[split] = {
        "path": verl_path.relative_to(out).as_posix(),
        "rows": len(records),
        "content_sha256": sha,
        "rllm_path": rllm_path.relative_to(out).as_posix() if rllm_layout else None,
    }
    write_json(out / REGISTRY_FILE, registry)
    return RegisterResult(name=name, split=split, path=str(verl_path), rows=len(records), content_sha256=sha,
                          changed=True, rllm_path=str(rllm_path) if rllm_layout else None)


def _register_with_rllm(name: str, split: str, rows: list[dict[str, Any]]) -> bool:
    """Seed 001/002: also enter the rows into rLLM's own ``DatasetRegistry`` when rLLM is importable (it writes
    its ``<split>_verl.parquet`` under its registry dir); without rLLM the files above are the registration."""
    try:
        from rllm.data import DatasetRegistry
    except ImportError:
        return False
    DatasetRegistry.register_dataset(name, rows, split=split)
    return True


def _rllm_verl_row(row: dict[str, Any]) -> dict[str, Any]:
    """rLLM's apply_verl_postprocessing shape: placeholder prompt; the real input is extra_info (the row)."""
    return {
        "prompt": [{"role": "user", "content": "placeholder"}],
        "reward_model": {"style": "rule", "ground_truth": None},
        "extra_info": row,
    }


def _write_parquet(path: Path, rows: Iterable[dict[str, Any]], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(list(rows), schema=schema)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
