"""TaskRecord: the one data model every source (R2E-Gym, SWE-bench, custom) is normalised into."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from graph_planner.config.sandbox_names import SandboxName, unalias_sandbox_name

#: synth: bugs injected into a repository (graph_planner.synth); mined: fix commits of its history.
TaskSource = Literal["r2e_gym", "swebench", "custom", "synth", "mined"]
#: Fields the agent never sees (grading only).
HIDDEN_FIELDS = ("test_cmd", "fail_to_pass", "pass_to_pass", "expected_output", "gold_patch", "test_patch",
                 "hidden_tests", "log_parser")
_ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class BuildSpec(BaseModel):
    """How to build the image of a custom task: base image + repo + commit + setup commands."""

    model_config = ConfigDict(extra="forbid")

    base_image: str = Field(description="Image the task image is built FROM.")
    repo: str = Field(description="Git URL or local path (relative to the task file) of the repository.")
    commit: str | None = Field(None, description="Commit to check out (default: HEAD).")
    setup_commands: list[str] = Field(default_factory=list, description="RUN lines executed after checkout.")
    workdir: str = Field("/testbed", description="Where the repository lives in the image.")


#: Longest problem statement accepted (characters), far above real issue texts: a multi-megabyte "issue" is a
#: broken row (or an attempt to flood the agent's context), rejected by row with this reason.
MAX_PROBLEM_STATEMENT_CHARS = 200_000


class TaskRecord(BaseModel):
    """One repair task. Agent-visible fields first; grading fields are hidden from the agent."""

    model_config = ConfigDict(extra="forbid")

    # identity
    task_id: str = Field(min_length=1)
    source: TaskSource
    split: str = Field(min_length=1)
    repo: str = Field(min_length=1, description="owner/name (SWE-bench) or short name (R2E).")
    base_commit: str | None = None
    # what the agent may see
    problem_statement: str = Field(min_length=1, max_length=MAX_PROBLEM_STATEMENT_CHARS,
                                   description="Issue text; at most MAX_PROBLEM_STATEMENT_CHARS characters.")
    title: str = ""
    max_steps: int = Field(30, ge=1)
    # environment
    image: str | None = Field(None, description="Docker image holding the repository at the buggy commit.")
    workdir: str = "/testbed"
    backend: SandboxName | None = Field(None, description="Sandbox override for this task.")
    env: dict[str, str] = Field(default_factory=dict)
    repo_path: str | None = Field(
        None, description="Local source tree for the local backend, relative to the dataset file's directory."
    )
    build: BuildSpec | None = None
    # grading (hidden from the agent)
    test_cmd: str = "python -m pytest -rA"
    test_files: list[str] = Field(default_factory=list, description="Test files/dirs passed to test_cmd.")
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    log_parser: str = Field("pytest", description="swebench parser name: pytest | pytest_options | pytest_v2 | django")
    expected_output: dict[str, str] | None = Field(None, description="R2E expected_output_json (test -> status).")
    hidden_tests: dict[str, str] = Field(
        default_factory=dict, description="R2E hidden test files (name -> source) copied in only to grade."
    )
    hidden_tests_dir: str = Field("/r2e_tests", description="Where hidden R2E tests go at grading time.")
    gold_patch: str | None = None
    test_patch: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _backend_alias = field_validator("backend", mode="before")(unalias_sandbox_name)

    @field_validator("fail_to_pass", "pass_to_pass", mode="before")
    @classmethod
    def _decode_test_list(cls, value: Any) -> Any:
        """SWE-bench Verified stores these as JSON strings; SWE-Gym / SWE-smith as real lists."""
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return []
            try:
                decoded = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list of test ids: {exc.msg}") from None
            if not isinstance(decoded, list):
                raise ValueError(f"expected a JSON list of test ids, got {type(decoded).__name__}")
            return decoded
        return value

    @property
    def safe_id(self) -> str:
        """File-system safe id used for instances/<id>.json and container names."""
        return _ID_SAFE.sub("_", self.task_id)

    @property
    def grading_mode(self) -> Literal["swebench", "r2e"]:
        """R2E native rows grade by expected outputs; everything else by FAIL_TO_PASS/PASS_TO_PASS."""
        if self.expected_output is not None and not self.fail_to_pass and not self.pass_to_pass:
            return "r2e"
        return "swebench"

    def agent_view(self) -> dict[str, Any]:
        """What a policy may see: identity and the issue, never grading data."""
        return self.model_dump(include={"task_id", "repo", "problem_statement", "title", "max_steps", "workdir"})

    def resolve_repo_path(self, dataset_dir: str | Path) -> Path | None:
        if self.repo_path is None:
            return None
        path = Path(self.repo_path)
        return path if path.is_absolute() else (Path(dataset_dir) / path).resolve()


#: Namespace of SWE-bench-shaped images built locally from a task's own tree (`gp images build`): the official
#: `swebench/` name is kept for images pulled from the official registry, so no report can pass one for the other.
LOCAL_IMAGE_NAMESPACE = "graph-planner-local"
#: Prefix of a synthesised task repository's image (:func:`graph_planner.synth.taskrepo.synth_image`).
SYNTH_IMAGE_PREFIX = "graph-planner/synth-"
#: Every image name this project builds itself (`gp images build`): no registry has them, so none is ever pulled.
BUILT_HERE_PREFIXES = (f"{LOCAL_IMAGE_NAMESPACE}/", SYNTH_IMAGE_PREFIX)
#: The reason a missing image built here fails with (no registry has it: a pull would only wait and fail).
BUILT_HERE_HINT = "built here, never pulled: run `gp images build <dataset dir>` first"


def built_here(image: str) -> bool:
    """Whether ``image`` is one `gp images build` makes here (never in a registry, so never pulled)."""
    return image.startswith(BUILT_HERE_PREFIXES)


def swebench_image_name(instance_id: str, arch: str = "x86_64", namespace: str = "swebench") -> str:
    """Prebuilt SWE-bench image: Docker Hub forbids '__', so it becomes '_1776_'."""
    key = f"sweb.eval.{arch}.{instance_id.lower()}".replace("__", "_1776_")
    return f"{namespace}/{key}:latest"
