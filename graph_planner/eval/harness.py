"""Second opinion on an eval run: hand predictions.jsonl to the official `swebench` 5.x harness.

Our own grading runs inside the episode's sandbox. When the SWE-bench images of the tasks are present in the local
Docker engine, the official harness can grade the same patches independently: it starts a container from the row's
``image`` (it only pulls when the image is missing, and we never call it then), applies the patch, runs the row's
``eval_script`` and grades with its own parser and F2P/P2P rules. 5.x rows carry their own ``eval_script``,
``log_parser`` and ``eval_type``, so ``harness_rows`` writes them from our TaskRecords.

The harness runs in a subprocess (``python -m swebench.harness.run_evaluation``) with its working directory in
``<run_dir>/harness``, so its ``logs/run_evaluation/<run_id>/...`` and summary ``<model>.<run_id>.json`` land there.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from graph_planner.data.record import TaskRecord
from graph_planner.grading.targets import grading_targets
from graph_planner.sandbox.base import PatchRejected
from graph_planner.sandbox.patching import created_files, touched_files

log = logging.getLogger(__name__)

HARNESS_MODULE = "swebench.harness.run_evaluation"
#: Markers the 5.x harness slices the test log with (swebench.harness.constants).
START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
ERROR_TAIL_CHARS = 2000


def applicable(task: TaskRecord) -> bool:
    """Every task graded by FAIL_TO_PASS/PASS_TO_PASS (SWE-bench rows and custom tasks that list them); native R2E
    rows grade by expected outputs, which the harness has no rule for."""
    return task.grading_mode == "swebench" and bool(task.fail_to_pass or task.pass_to_pass)


def _parser_key(name: str) -> str:
    """TaskRecord says 'pytest'; the harness's PARSER_REGISTRY says 'parse_log_pytest'."""
    return name if name.startswith("parse_log_") else f"parse_log_{name}"


def eval_script(task: TaskRecord) -> str:
    """An eval.sh shaped like the official ones: reset the test files, apply the test patch, run the tests between
    the markers, reset again. The harness inserts the exit-code capture after the test command itself."""
    from swebench.utils import generate_heredoc_delimiter

    if not task.base_commit:
        raise ValueError(f"task {task.task_id}: no base_commit, so its test files cannot be reset for the harness")
    base = shlex.quote(task.base_commit)
    new_files = created_files(task.test_patch) if task.test_patch else []
    old_files = [f for f in (touched_files(task.test_patch) if task.test_patch else []) if f not in new_files]
    reset = []
    if old_files:
        reset.append(f"git checkout {base} -- {' '.join(shlex.quote(f) for f in old_files)}")
    if new_files:
        reset.append(f"rm -f {' '.join(shlex.quote(f) for f in new_files)}")
    lines = ["#!/bin/bash", "set -uxo pipefail", f"cd {shlex.quote(task.workdir)}",
             "git config --global --add safe.directory " + shlex.quote(task.workdir),
             "git status", f"git -c core.fileMode=false diff {base}", *reset]
    if task.test_patch:
        delimiter = generate_heredoc_delimiter(task.test_patch)
        body = task.test_patch if task.test_patch.endswith("\n") else task.test_patch + "\n"
        lines.append(f"git apply -v - <<'{delimiter}'\n{body}{delimiter}")
    test_cmd = " ".join([task.test_cmd, *(shlex.quote(t) for t in grading_targets(task))])
    exports = [f"export {k}={shlex.quote(v)}" for k, v in sorted(task.env.items())]
    lines += [*exports, "export PYTHONDONTWRITEBYTECODE=1", f": '{START_MARKER}'", test_cmd, f": '{END_MARKER}'", *reset]
    return "\n".join(lines) + "\n"


def harness_rows(tasks: Iterable[TaskRecord]) -> list[dict[str, Any]]:
    """swebench-5 dataset rows (all strings, F2P/P2P JSON-encoded like SWE-bench Verified) for the applicable tasks."""
    rows = []
    for task in tasks:
        if not applicable(task):
            continue
        if not task.image:
            raise ValueError(f"task {task.task_id}: no image; the official harness runs only from an image")
        rows.append({
            "instance_id": task.task_id,
            "repo": task.repo,
            "base_commit": task.base_commit or "",
            "patch": task.gold_patch or "",
            "test_patch": task.test_patch or "",
            "problem_statement": task.problem_statement,
            "version": str(task.metadata.get("version", "")),
            "FAIL_TO_PASS": json.dumps(task.fail_to_pass),
            "PASS_TO_PASS": json.dumps(task.pass_to_pass),
            "image": task.image,
            "eval_script": eval_script(task),
            "log_parser": _parser_key(task.log_parser),
            "eval_type": "pass_and_fail",
        })
    return rows


def images_present(client: Any, tasks: Iterable[TaskRecord]) -> list[str]:
    """Images (of the applicable tasks) the local engine lacks; a task without any image is named instead."""
    import docker.errors

    missing: list[str] = []
    for task in tasks:
        if not applicable(task):
            continue
        name = task.image or f"(task {task.task_id} has no image)"
        if name in missing:
            continue
        if task.image is None:
            missing.append(name)
            continue
        try:
            client.images.get(task.image)
        except docker.errors.ImageNotFound:
            missing.append(name)
    return missing


def _image_origin(tasks: list[TaskRecord]) -> str:
    """Whose images the harness ran on: official `swebench/` names only come from the official registry."""
    official = sum(1 for t in tasks if (t.image or "").startswith("swebench/"))
    if official == len(tasks):
        return "official swebench images"
    if official == 0:
        return "locally built images (not the official swebench images)"
    return f"{official} official and {len(tasks) - official} locally built image(s)"


def _swebench_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("swebench")
    except PackageNotFoundError:
        return "?"


def _skipped(note: str) -> dict[str, Any]:
    return {"ran": False, "note": note}


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _remove_left_containers(client: Any, names: list[str]) -> None:
    """The harness stops its containers with the `docker` CLI; where that failed, docker-py removes them."""
    for name in names:
        try:
            client.containers.get(name).remove(force=True)
        except Exception as exc:  # noqa: BLE001 - housekeeping; the reaper catches what is left
            log.warning("could not remove harness container %s: %s", name, exc)


def run_swebench_harness(tasks: list[TaskRecord], predictions_path: Path, run_dir: Path, run_id: str,
                         max_workers: int = 1, timeout: int = 1800, client: Any = None) -> dict[str, Any]:
    """Grade ``predictions_path`` with the official harness against local images; its numbers, or why it did not run.

    ``timeout`` is the harness's per-instance limit (seconds). Returns ``{"ran": True, "submitted", "resolved",
    "resolved_rate", "resolved_ids", "empty_patch", "errors", "run_id", "summary", "note"}`` or
    ``{"ran": False, "note"}`` (not applicable, images missing, no engine, or the harness failed: its error tail).
    """
    todo = [t for t in tasks if applicable(t)]
    if not todo:
        return _skipped("not applicable: no task lists FAIL_TO_PASS/PASS_TO_PASS (native R2E rows grade by expected "
                        "outputs, which the harness has no rule for)")
    if client is None:
        try:
            import docker

            client = docker.from_env()
            client.ping()
        except Exception as exc:  # noqa: BLE001 - any engine failure means "cannot run", said in the note
            return _skipped(f"skipped: no Docker engine answers ({exc}); set DOCKER_HOST to a running engine")
    missing = images_present(client, todo)
    if missing:
        return _skipped(f"skipped: {len(missing)} image(s) not present locally: {', '.join(missing)} "
                        "(build them with `gp images build DATASET`)")
    wanted = {t.task_id for t in todo}
    predictions = [json.loads(line) for line in Path(predictions_path).read_text(encoding="utf-8").splitlines()
                   if line.strip()]
    predictions = [p for p in predictions if p.get("instance_id") in wanted]
    if not predictions:
        return _skipped(f"not applicable: {predictions_path} holds no prediction for a task with FAIL_TO_PASS/"
                        "PASS_TO_PASS")

    harness_dir = Path(run_dir) / "harness"
    harness_dir.mkdir(parents=True, exist_ok=True)
    try:
        rows = harness_rows(todo)
    except (ValueError, PatchRejected) as exc:
        return _skipped(f"skipped: cannot write harness rows: {exc}")
    _write_jsonl(harness_dir / "dataset.jsonl", rows)
    _write_jsonl(harness_dir / "predictions.jsonl", predictions)
    cmd = [sys.executable, "-m", HARNESS_MODULE, "--dataset_name", "dataset.jsonl", "--split", "test",
           "--predictions_path", "predictions.jsonl", "--run_id", run_id, "--max_workers", str(max_workers),
           "--timeout", str(int(timeout)), "--report_dir", "."]
    # the rows are local files: the harness must never reach for the Hugging Face Hub
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    deadline = int(timeout) * math.ceil(len(predictions) / max(1, max_workers)) + 300
    log.info("official swebench harness: %s (cwd %s)", shlex.join(cmd), harness_dir)
    try:
        proc = subprocess.run(cmd, check=False, cwd=harness_dir, env=env, capture_output=True, text=True, timeout=deadline)
    except subprocess.TimeoutExpired as exc:
        tail = ((exc.stdout or "") + (exc.stderr or "")) if isinstance(exc.stdout, str) else ""
        return _skipped(f"harness failed: no result after {deadline}s ({shlex.join(cmd)}): {tail[-ERROR_TAIL_CHARS:]}")
    (harness_dir / "harness.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    model = str(predictions[0].get("model_name_or_path") or "None").replace("/", "__")
    summary_path = harness_dir / f"{model}.{run_id}.json"
    if proc.returncode != 0 or not summary_path.is_file():
        why = f"exit {proc.returncode}" if proc.returncode != 0 else f"no summary {summary_path.name}"
        return _skipped(f"harness failed ({why}; log {harness_dir / 'harness.log'}): "
                        f"{(proc.stdout + proc.stderr)[-ERROR_TAIL_CHARS:]}")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    _remove_left_containers(client, summary.get("unstopped_containers", []))
    submitted = len(predictions)
    resolved_ids = list(summary.get("resolved_ids", []))
    return {
        "ran": True,
        "submitted": submitted,
        "resolved": len(resolved_ids),
        "resolved_rate": len(resolved_ids) / submitted,
        "resolved_ids": resolved_ids,
        "submitted_ids": [str(p["instance_id"]) for p in predictions],
        "error_ids": list(summary.get("error_ids", [])),
        "empty_patch_ids": list(summary.get("empty_patch_ids", [])),
        "empty_patch": summary.get("empty_patch_instances", 0),
        "errors": summary.get("error_instances", 0),
        "run_id": run_id,
        "summary": str(summary_path.relative_to(run_dir)),
        "note": f"official swebench {_swebench_version()} harness on {_image_origin(todo)}",
    }
