"""EpisodeSummary: what one finished episode came to, built once by the env when the episode ends and read by
everyone after it (training metrics of both engines, eval rows, the rLLM adapter, trajectories). One type, so
the engines cannot drift apart on what an episode reports (issue 25: the verl summary had dropped localisation).

Plain data; ``to_dict`` / ``from_dict`` carry it through JSON (``info["episode"]``, the verl workers'
``episodes.jsonl``, trajectory files). ``from_dict`` accepts the older, partial dicts (defaults for what is
missing) and refuses a field of the wrong type with the field's name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Keys of ``patch_stats``: synthesised patches and what became of them.
PATCH_COUNTS = ("generated", "applied", "kept", "rolled_back")
#: Large text fields left out of the per-episode telemetry record (metrics never read them).
BULKY_FIELDS = ("patch", "test_output")


@dataclass
class EpisodeSummary:
    """One episode's outcome and counters. ``episode_return`` is the sum of the env's step rewards (the GRPO
    score); ``steps`` counts planner turns; ``clipped_responses`` counts turns whose model response was cut at
    the response length limit; ``test_output`` is the final graded run's log as the grader kept it."""

    task_id: str
    termination_reason: str = ""
    resolved: bool = False
    verdict: str = "unresolved"
    tampered: bool = False
    episode_return: float = 0.0
    steps: int = 0
    max_steps: int = 0
    repo_ops: int = 0
    patch: str = ""
    synthesizer: str = ""
    policy: str = ""
    localisation: dict[str, Any] | None = None
    parse_errors: int = 0
    parse_error_codes: dict[str, int] = field(default_factory=dict)
    fallbacks: int = 0
    invalid_actions: int = 0
    invalid_nodes: int = 0
    clamp_warnings: int = 0
    clipped_responses: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    patch_stats: dict[str, Any] = field(default_factory=dict)
    tests_run: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    diagnostic: str | None = None
    tampered_runs: int = 0
    tamper_evidence: list[str] = field(default_factory=list)
    test_output: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics_record(self) -> dict[str, Any]:
        """The summary without its bulky text (final patch, test log): what a telemetry line carries."""
        return {k: v for k, v in self.to_dict().items() if k not in BULKY_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **defaults: Any) -> EpisodeSummary:
        """Read a summary back; ``defaults`` fill fields ``data`` lacks (e.g. from the Trajectory around it).
        Unknown keys are ignored (a trajectory's info also holds the first observation)."""
        names = {f.name: f for f in fields(cls)}
        values = {k: v for k, v in defaults.items() if k in names}
        values.update({k: v for k, v in data.items() if k in names and v is not None})
        if "task_id" not in values:
            raise ValueError("episode summary: no task_id")
        for key in ("parse_errors", "steps", "max_steps", "repo_ops", "fallbacks", "invalid_actions",
                    "invalid_nodes", "clamp_warnings", "clipped_responses", "tests_run", "tampered_runs"):
            if key in values:
                values[key] = _int(values[key], key)
        if "episode_return" in values:
            values["episode_return"] = _float(values["episode_return"], "episode_return")
        for key in ("patch_stats", "actions", "parse_error_codes", "tokens"):
            if key in values and not isinstance(values[key], Mapping):
                raise TypeError(f"episode summary of task {values['task_id']!r}: {key} must be a mapping, "
                                f"got {type(values[key]).__name__}")
        summary = cls(**values)
        summary.task_id = str(summary.task_id)
        summary.resolved, summary.tampered = bool(summary.resolved), bool(summary.tampered)
        if "verdict" not in values:
            summary.verdict = "tampered" if summary.tampered else ("resolved" if summary.resolved else "unresolved")
        return summary

    # ---- what metrics read ------------------------------------------------------------------------------
    def patch_counts(self) -> tuple[int, int, dict[str, int]]:
        """(generated, applied, rejected by reason) from ``patch_stats``; a malformed entry names itself."""
        stats = self.patch_stats or {}
        where = f"episode of task {self.task_id!r}: patch_stats"
        rejected = stats.get("rejected") or {}
        if not isinstance(rejected, Mapping):
            raise TypeError(f"{where}['rejected']: expected {{reason: count}}, got {rejected!r}")
        try:
            return (int(stats.get("generated", 0)), int(stats.get("applied", 0)),
                    {str(reason): int(n) for reason, n in rejected.items()})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: counts must be integers ({exc})") from None


def _int(value: Any, key: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"episode summary: {key} must be an integer, got {value!r}") from None


def _float(value: Any, key: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"episode summary: {key} must be a number, got {value!r}") from None
