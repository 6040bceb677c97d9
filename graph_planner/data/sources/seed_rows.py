"""Row shapes the seeds write by hand, read by the custom source (``gp data prepare --custom FILE``).

Seed 001 builds its training JSONL as ``{task_id, max_steps, issue, sandbox: {backend: repoenv, docker_image,
workdir, mounts, env, r2e_ds_json}}``; ``r2e_ds_json`` names the R2E-Gym row (the "ds") RepoEnv starts from. That
row carries the grading data (``expected_output_json``, hidden tests), so it is normalised as an R2E-Gym row and
the seed row's own fields (id, issue, image, workdir, env, backend) win. Raw SWE-bench / R2E-Gym rows given to
``--custom`` are refused with the flag that reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_planner.data.record import TaskRecord
from graph_planner.data.sources import r2e_gym
from graph_planner.data.sources.base import RowRejected


def is_seed_repoenv_row(row: Mapping[str, Any]) -> bool:
    return isinstance(row.get("sandbox"), Mapping) and "issue" in row


def misplaced_source_hint(row: Mapping[str, Any]) -> str | None:
    """A reason when a custom row is really a SWE-bench or R2E-Gym row (those have their own flags)."""
    if "instance_id" in row and ("FAIL_TO_PASS" in row or "PASS_TO_PASS" in row):
        return ("looks like a SWE-bench row (instance_id, FAIL_TO_PASS): prepare it with --swebench-dataset FILE, "
                "which reads its test lists and prebuilt image")
    if "repo_name" in row and "expected_output_json" in row and "task_id" not in row:
        return ("looks like an R2E-Gym row (repo_name, expected_output_json): prepare it with --r2e-dataset FILE")
    return None


def normalize_seed_repoenv_row(row: Mapping[str, Any], base_dir: Path, split: str, max_steps: int) -> TaskRecord:
    """A seed 001 row -> TaskRecord (source custom); every refusal names the field."""
    task_id = row.get("task_id") if isinstance(row.get("task_id"), str) else None
    sandbox = dict(row["sandbox"])
    if sandbox.get("mounts"):
        raise RowRejected("sandbox.mounts: host bind mounts are not supported (a task sandbox never sees host "
                          "paths); put the files into the image (gp images build) instead", task_id)
    ds_name = sandbox.get("r2e_ds_json")
    if not isinstance(ds_name, str) or not ds_name:
        raise RowRejected("sandbox.r2e_ds_json: missing; it names the R2E-Gym row (repo, commit, "
                          "expected_output_json, tests) the task is graded with", task_id)
    ds = _read_ds(ds_name, base_dir, task_id)
    record = r2e_gym.normalize_r2e_row(ds, split, max_steps, {"r2e_ds_json": ds_name})
    issue = row.get("issue")
    if not isinstance(issue, str) or not issue.strip():
        raise RowRejected("issue: missing or empty", task_id)
    backend = sandbox.get("backend")  # TaskRecord resolves an alias (repoenv) and refuses an unknown name
    backend = backend if isinstance(backend, str) else None
    update: dict[str, Any] = {
        "source": "custom", "problem_statement": issue,
        "max_steps": row.get("max_steps", max_steps), "backend": backend,
        "env": {str(k): str(v) for k, v in (sandbox.get("env") or {}).items()},
        "metadata": {**record.metadata, "r2e_row": ds},
    }
    if task_id:
        update["task_id"] = task_id
    if sandbox.get("docker_image"):
        update["image"] = sandbox["docker_image"]
    if sandbox.get("workdir"):
        update["workdir"] = sandbox["workdir"]
    try:
        return TaskRecord.model_validate({**record.model_dump(), **update})
    except ValueError as exc:
        raise RowRejected(f"seed 001 row: {exc}", task_id) from None


def task_from_ds_json(ds_json: str, max_steps: int, base_dir: Path | None = None) -> TaskRecord:
    """Seed 002's ``env.env_args.ds_json``: the R2E-Gym row in that file as a task on the R2E-Gym backend."""
    ds = _read_ds(ds_json, base_dir or Path.cwd(), None)
    record = r2e_gym.normalize_r2e_row(ds, "train", max_steps, {"r2e_ds_json": ds_json})
    return record.model_copy(update={"backend": "r2egym", "metadata": {**record.metadata, "r2e_row": ds}})


def _read_ds(name: str, base_dir: Path, task_id: str | None) -> dict[str, Any]:
    """The ds JSON, relative to the task file's dir, else to the working dir (the seed writes repo-root paths)."""
    path = Path(name).expanduser()
    candidates = [path] if path.is_absolute() else [base_dir / path, Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise RowRejected(f"sandbox.r2e_ds_json: {candidate} is not valid JSON ({exc.msg})", task_id) from None
            if not isinstance(data, dict):
                raise RowRejected(f"sandbox.r2e_ds_json: {candidate} must hold one JSON object", task_id)
            return data
    raise RowRejected(f"sandbox.r2e_ds_json: {name} not found (looked in {base_dir} and {Path.cwd()})", task_id)
