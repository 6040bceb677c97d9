"""PlannerEnv: one task, one sandbox, the code graph of the task's own files, memories W/M, the nine actions,
rewards and termination from ``env.*`` config. Grading at submit is the sandbox's full F2P/P2P (or R2E) run."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graph_planner.codegraph import (
    CodeGraph,
    GraphCache,
    UnknownNodeError,
    apply_changes,
    build_graph,
    expand,
    find,
    load_files_from_sandbox,
    read,
    to_cgm_payload,
)
from graph_planner.config.schema import EnvConfig
from graph_planner.data.record import TaskRecord
from graph_planner.env.localisation import LocalisationTracker
from graph_planner.env.memory import Memory, unknown_node_reason
from graph_planner.env.observation import issue_text, node_summary, outline, render
from graph_planner.env.repair import RepairCycle, RepairOutcome, TestSummary
from graph_planner.episode.actions import ActionBase, action_to_dict
from graph_planner.episode.patch import RepairRequest
from graph_planner.episode.results import TestReport
from graph_planner.episode.summary import EpisodeSummary
from graph_planner.episode.wire import EXPECTED_FORM, ActionParseError, parse_action_detailed
from graph_planner.models.synthesizers import PatchSynthesizer
from graph_planner.sandbox.base import Sandbox, SandboxError

log = logging.getLogger(__name__)
READ_MAX_LINES = 200
#: The verdict of a submit that changed nothing. No tests run: the task's failing tests fail on the base tree by
#: definition (``gp validate-tasks`` checks it), and the SWE-bench harness grades an empty patch unresolved too.
EMPTY_PATCH = "empty patch: nothing was changed, so the task's failing tests still fail (no tests were run)"


@dataclass
class StepResult:
    observation: str
    obs: dict[str, Any]
    reward: float
    done: bool
    info: dict[str, Any]


@dataclass
class EpisodeStats:
    """Counters of one episode (what telemetry and reports read from ``info["episode"]``)."""

    parse_errors: Counter[str] = field(default_factory=Counter)
    fallbacks: int = 0
    invalid_actions: int = 0
    invalid_nodes: int = 0
    clamp_warnings: int = 0
    #: Turns whose model response was cut at the response length limit (the runner says so at ``step``).
    clipped_responses: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    generated: int = 0
    applied: int = 0
    kept: int = 0
    rolled_back: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    no_patch: Counter[str] = field(default_factory=Counter)
    tests_run: int = 0
    synth_prompt_tokens: int = 0
    synth_completion_tokens: int = 0
    diagnostics: set[str] = field(default_factory=set)
    #: Graded test runs of the episode found forged, and their evidence (``<kind>: <evidence>``; hidden from the
    #: agent, kept for trajectories and reports).
    tampered_runs: int = 0
    tamper_evidence: list[str] = field(default_factory=list)

    def record_test_run(self, kind: str, report: TestReport) -> None:
        self.tests_run += 1
        if report.tampered:
            self.tampered_runs += 1
            self.tamper_evidence.extend(f"{kind}: {e}" for e in report.tamper_evidence or ["(no evidence given)"])

    def record_repair(self, outcome: RepairOutcome) -> None:
        self.synth_prompt_tokens += outcome.proposal.prompt_tokens
        self.synth_completion_tokens += outcome.proposal.completion_tokens
        if outcome.proposal.diagnostic:
            self.diagnostics.add(outcome.proposal.diagnostic)
        if outcome.status == "no_patch":
            self.no_patch[(outcome.reason or "empty").split(":", 1)[0]] += 1
            return
        self.generated += 1
        if outcome.status in ("kept", "rolled_back"):
            self.applied += 1
        if outcome.status == "kept":
            self.kept += 1
        elif outcome.status == "rolled_back":
            self.rolled_back += 1
        if outcome.reject_reason:
            self.rejected[outcome.reject_reason] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "parse_errors": sum(self.parse_errors.values()), "parse_error_codes": dict(self.parse_errors),
            "fallbacks": self.fallbacks, "invalid_actions": self.invalid_actions,
            "invalid_nodes": self.invalid_nodes, "clamp_warnings": self.clamp_warnings,
            "clipped_responses": self.clipped_responses, "actions": dict(self.actions),
            "patch_stats": {"generated": self.generated, "applied": self.applied, "kept": self.kept,
                            "rolled_back": self.rolled_back, "rejected": dict(self.rejected),
                            "no_patch": dict(self.no_patch)},
            "tests_run": self.tests_run,
            "tokens": {"synth_prompt": self.synth_prompt_tokens, "synth_completion": self.synth_completion_tokens},
            "diagnostic": ",".join(sorted(self.diagnostics)) or None,
            "tampered_runs": self.tampered_runs, "tamper_evidence": list(self.tamper_evidence),
        }


def step_budget(task: TaskRecord, run_max_steps: int, explicit: int | None = None) -> int:
    """Planner steps of one episode: ``explicit`` (the CLI's --max-steps) when given, else the run's
    ``env.max_steps`` (``run_max_steps``) but never more than the task's own cap (``TaskRecord.max_steps``)."""
    return explicit or min(run_max_steps, task.max_steps)


class PlannerEnv:
    """``reset() -> (text, obs)``; ``step(action | raw model output) -> StepResult``."""

    def __init__(self, task: TaskRecord, sandbox: Sandbox, env_config: EnvConfig, synthesizer: PatchSynthesizer,
                 graph_cache: GraphCache | None = None, max_steps: int | None = None, *,
                 grade_in_fresh_sandbox: bool = True) -> None:
        """Built by :func:`graph_planner.env.assembly.build_env` (tests and benchmarks may build one directly).
        The env reads its own config section and one sandbox setting (``sandbox.grade_in_fresh_sandbox``), not
        the whole run config."""
        self.task = task
        self.sandbox = sandbox
        self.env_config = env_config
        self.grade_in_fresh_sandbox = grade_in_fresh_sandbox
        self.synthesizer = synthesizer
        self.graph_cache = graph_cache
        self.max_steps = step_budget(task, env_config.max_steps, max_steps)
        self.graph: CodeGraph | None = None
        self.memory = Memory(env_config.working_max_nodes, env_config.memory_max_nodes)
        self.test_runs: list[dict[str, Any]] = []
        self.stats = EpisodeStats()
        self.repair = RepairCycle(task, sandbox, self.synthesizer, env_config, self._log_test_run)
        self.step_count = 0
        self.last_repair: dict[str, Any] | None = None
        self.done = True
        self._base_snapshot: str | None = None
        self._ops_at_reset = 0
        self._own_ops = 0
        self.localisation: LocalisationTracker | None = None
        #: Built once when the episode ends (``step`` or ``cut_short``); None while it runs.
        self.summary: EpisodeSummary | None = None
        self.episode_return = 0.0
        self._grading_log = ""

    # ------------------------------------------------------------------ episode lifecycle
    def reset(self) -> tuple[str, dict[str, Any]]:
        """Start an episode on the base tree (a previous episode's edits are undone) and show the issue."""
        self.sandbox.start()
        if self._base_snapshot is None:
            self._base_snapshot = self.sandbox.snapshot()
        else:
            self.sandbox.restore(self._base_snapshot)
        commit = getattr(self.sandbox, "base_commit", None) or self.task.base_commit

        def loader() -> dict[str, bytes]:
            return load_files_from_sandbox(self.sandbox)

        if self.graph_cache is not None:
            self.graph = self.graph_cache.get_or_build(self.task.repo, commit, loader)
        else:
            self.graph = build_graph(loader(), self.task.repo, commit)
        self.memory = Memory(self.env_config.working_max_nodes, self.env_config.memory_max_nodes)
        self.stats = EpisodeStats()
        self.test_runs = []
        self.repair = RepairCycle(self.task, self.sandbox, self.synthesizer, self.env_config, self._log_test_run)
        self.step_count = 0
        self.done = False
        self.last_repair = None
        self.summary, self.episode_return, self._grading_log = None, 0.0, ""
        self._ops_at_reset = getattr(self.sandbox, "op_count", 0)
        self._own_ops = 0
        nodes = outline(self.graph)
        self.memory.see(n["id"] for n in nodes)
        # measured from the hidden gold patch, never shown to the planner (env/localisation.py)
        self.localisation = LocalisationTracker.for_task(self.graph, self.task.gold_patch)
        self.localisation.observe(0, self.memory.entries, self.memory.working)
        return render(self.task, self.memory, 0, self.max_steps, outline_nodes=nodes)

    @property
    def repo_ops(self) -> int:
        """Sandbox operations this episode (the sandbox's own counter when it has one)."""
        if hasattr(self.sandbox, "op_count"):
            return int(self.sandbox.op_count) - self._ops_at_reset
        return self._own_ops

    def _log_test_run(self, kind: str, report: TestReport, summary: TestSummary | None) -> None:
        self.stats.record_test_run(kind, report)
        self.test_runs.append({
            "task_id": self.task.task_id, "step": self.step_count, "kind": kind, "mode": report.mode,
            "resolved": report.resolved, "passing": summary.score if summary else None,
            "total": summary.total if summary else None, "rc": report.rc, "seconds": round(report.seconds, 3),
            "timed_out": report.timed_out, "error": report.error, "statuses": report.statuses,
            "verdict": report.verdict, "tamper_evidence": report.tamper_evidence,
        })

    # ------------------------------------------------------------------ step
    def step(self, action: ActionBase | Any, *, parse_error: ActionParseError | None = None,
             used_fallback: bool = False, response_clipped: bool = False) -> StepResult:
        """Apply one action (or parse a raw model output first). Rewards: -step_penalty every step,
        -format_penalty for an invalid output, +success_reward*reward_scale when submit resolves the task,
        -failure_penalty when the episode ends unresolved, -timeout_penalty when a limit ends it, -tamper_penalty
        (and no localisation reward) when the submitted tree's graded run was forged. A forged run inside the
        episode (repair check, run_tests) is rolled back and recorded, not charged: it leaves nothing to submit.
        ``response_clipped``: the model's response was cut at the response length limit (counted only)."""
        if self.done or self.graph is None:
            raise RuntimeError(f"episode of task {self.task.task_id} is over (or not started): call reset()")
        cfg = self.env_config
        self.step_count += 1
        warnings: list[str] = []
        if not isinstance(action, ActionBase):
            try:
                parsed = parse_action_detailed(action)
                action, warnings = parsed.action, list(parsed.warnings)
            except ActionParseError as exc:
                parse_error, action = exc, None
        reward = -cfg.step_penalty
        info: dict[str, Any] = {"step": self.step_count, "used_fallback": used_fallback, "parse_error": None}
        if parse_error is not None:
            self.stats.parse_errors[parse_error.code] += 1
            info["parse_error"], info["parse_error_detail"] = parse_error.code, parse_error.detail
            reward -= cfg.format_penalty
        self.stats.fallbacks += int(used_fallback)
        self.stats.clipped_responses += int(response_clipped)
        self.stats.clamp_warnings += len(warnings)
        result: dict[str, Any] | None = None
        error: str | None = None
        resolved = False
        if action is None:
            self.stats.invalid_actions += 1
            assert parse_error is not None
            error = f"invalid action ({parse_error.code}): {parse_error.detail}. Reply with {EXPECTED_FORM}"
        else:
            if parse_error is not None:
                warnings.append(f"your output was invalid ({parse_error.code}); the rule policy chose this action")
            self.stats.actions[action.name] += 1  # type: ignore[attr-defined]
            result, error, resolved = self._dispatch(action, info)
        done, reason = False, ""
        forged = bool((info.get("grading") or {}).get("tampered"))  # the submitted tree's verdict is tampered
        if action is not None and action.name == "submit":  # type: ignore[attr-defined]
            done, reason = True, "submitted"
            reward += cfg.success_reward * cfg.reward_scale if resolved else -cfg.failure_penalty
            if forged:
                reward -= cfg.tamper_penalty
        elif self.repo_ops >= cfg.repo_op_limit:
            done, reason = True, "repo_op_limit"
        elif self.step_count >= self.max_steps:
            done, reason = True, "max_steps"
        if reason in ("repo_op_limit", "max_steps"):
            reward -= cfg.timeout_penalty + cfg.failure_penalty
        loc = self.localisation
        if loc is not None:
            is_read = action is not None and action.name == "read" and not error  # type: ignore[attr-defined]
            read_node = action.node_id if is_read else None  # type: ignore[union-attr,attr-defined]
            loc.observe(self.step_count, self.memory.entries, self.memory.working, read_node=read_node)
            if done and cfg.localisation_reward > 0 and not forged:
                reward += cfg.localisation_reward * loc.peak_m_recall
        info.update(action=action_to_dict(action) if action is not None else None, result=result, error=error,
                    warnings=warnings, repo_ops=self.repo_ops)
        text, obs = render(self.task, self.memory, self.step_count, self.max_steps,
                           last_action=info["action"], result=result, error=error, warnings=warnings,
                           last_repair=self.last_repair, result_token_budget=cfg.observation_token_budget)
        reward = round(reward, 6)
        self.episode_return += reward
        if done:
            self.done = True
            info["episode"] = self._finish(reason, resolved, forged).to_dict()
            if reason != "submitted":
                text += f"\nEpisode ended: {reason.replace('_', ' ')} reached without submit."
        return StepResult(text, obs, reward, done, info)

    def cut_short(self, reason: str) -> EpisodeSummary:
        """End a running episode from outside (verl's token budget ran out before the env ended it), charged
        like the env's own limits: timeout + failure penalty, plus the localisation reward. Returns the summary
        (its ``episode_return`` includes the charge); a finished episode's summary is returned unchanged."""
        if self.summary is not None:
            return self.summary
        if self.done or self.graph is None:
            raise RuntimeError(f"episode of task {self.task.task_id} was not started: call reset()")
        cfg = self.env_config
        charge = -(cfg.timeout_penalty + cfg.failure_penalty)
        if self.localisation is not None and cfg.localisation_reward > 0:
            charge += cfg.localisation_reward * self.localisation.peak_m_recall
        self.episode_return += round(charge, 6)
        self.done = True
        return self._finish(reason, False)

    def _dispatch(self, action: ActionBase, info: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, bool]:
        """Run one action; returns (result, error, resolved)."""
        graph, memory, args = self.graph, self.memory, action.arguments()
        assert graph is not None
        name = action.name  # type: ignore[attr-defined]
        try:
            if name == "explore_find":
                hits = find(graph, args["query"], limit=args["limit"])
                nodes = [node_summary(h.node, score=round(h.score, 3), reasons=h.reasons) for h in hits]
                memory.see(n["id"] for n in nodes)
                return {"query": args["query"], "nodes": nodes}, None, False
            if name == "explore_expand":
                hits = expand(graph, args["node_id"], hop=args["hop"], limit=args["limit"])
                nodes = [node_summary(h.node, edge=h.edge.value, direction=h.direction, via=h.via, hop=h.hop)
                         for h in hits]
                memory.see([args["node_id"], *(n["id"] for n in nodes)])
                return {"node_id": args["node_id"], "hop": args["hop"], "nodes": nodes}, None, False
            if name == "read":
                res = read(graph, args["node_id"], context_lines=args["context_lines"], max_lines=READ_MAX_LINES)
                memory.see([args["node_id"]])
                return {"node_id": res.node_id, "path": res.path, "start_line": res.start_line,
                        "end_line": res.end_line, "code": res.text, "truncated": res.truncated}, None, False
        except UnknownNodeError:
            self.stats.invalid_nodes += 1
            return None, unknown_node_reason(graph, args["node_id"]), False
        if name == "memory_commit":
            out = memory.commit(graph, args["node_ids"], args["note"])
            self.stats.invalid_nodes += len(out.rejected)
            return {"added": out.added, "already": out.already, "rejected": out.rejected}, None, False
        if name == "memory_delete":
            removed, missing = memory.delete(args["node_ids"])
            return {"removed": removed, "missing": missing}, None, False
        if name == "note":
            memory.add_note(args["text"])
            return {"notes": len(memory.notes)}, None, False
        if name == "run_tests":
            return self._sandbox_action(lambda: self.repair.run_failing_tests().to_dict())
        if name == "repair":
            return self._repair(args, info)
        if name == "submit":
            return self._submit(info)
        raise AssertionError(f"unhandled action {name}")

    def _sandbox_action(self, fn: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None, bool]:
        self._own_ops += 1
        try:
            return fn(), None, False
        except SandboxError as exc:
            return None, f"sandbox error: {exc}", False

    # ------------------------------------------------------------------ repair / submit
    def repair_request(self, plan: str, targets: list[str]) -> RepairRequest:
        """The synthesiser request built from memory M (targets first), within env.synthesis_token_budget."""
        assert self.graph is not None
        chosen = [t for t in targets if t in self.memory.entries]
        ids = chosen + [i for i in self.memory.entries if i not in chosen]
        budget = self.env_config.synthesis_token_budget
        snippets, used = [], 0
        for node_id in ids:
            snip = self.memory.entries[node_id].snippet()
            cost = len(snip["code"]) // 4 + 1
            if used + cost > budget // 2 and snippets:
                break
            snippets.append(snip)
            used += cost
        notes = list(self.memory.notes) + [f"{e.node_id}: {e.note}" for e in self.memory.entries.values() if e.note]
        return RepairRequest(
            task_id=self.task.task_id, issue=issue_text(self.task), plan=plan,
            graph=to_cgm_payload(self.graph, ids, budget - used), snippets=snippets, notes=notes,
            target_node_ids=chosen,
            constraints={"max_files": self.env_config.patch_max_files,
                         "max_changed_lines": self.env_config.patch_max_lines,
                         "editable_files": sorted({e.path for e in self.memory.entries.values() if e.path}),
                         "forbidden_paths": sorted(self.repair.protected)},
        )

    def _repair(self, args: dict[str, Any], info: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, bool]:
        if self.env_config.disable_cgm_synthesis:
            self.last_repair = {"status": "refused", "reason": "synthesis disabled"}
            return ({**self.last_repair, "reason": "synthesis disabled (env.disable_cgm_synthesis): planner-only "
                     "run, submit when done"}, None, False)
        if not self.memory.entries:
            self.last_repair = {"status": "refused", "reason": "memory M is empty"}
            return ({**self.last_repair, "reason": "memory M is empty: memory_commit the code to change first"},
                    None, False)
        unknown = [t for t in args["target_node_ids"] if t not in self.memory.entries]
        request = self.repair_request(args["plan"], args["target_node_ids"])
        self._own_ops += 1
        try:
            outcome = self.repair.run(request)
        except SandboxError as exc:
            self.last_repair = {"status": "rejected", "reason": "sandbox error"}
            return None, f"sandbox error during repair (the tree was restored): {exc}", False
        self.stats.record_repair(outcome)
        info["repair"] = outcome.to_dict()
        if outcome.status == "kept":
            self._refresh_graph(outcome.files)
        self.last_repair = {"status": outcome.status, "reason": outcome.reason}
        result = {k: v for k, v in outcome.to_dict().items() if k not in ("proposal", "seconds")}
        if unknown:
            result["ignored_targets"] = unknown
        return result, None, False

    def _refresh_graph(self, files: list[str]) -> None:
        """After a kept patch: re-parse the changed files and refresh M's code (ids that vanished are dropped)."""
        assert self.graph is not None
        changed: dict[str, str | None] = {}
        for path in files:
            try:
                changed[path] = self.sandbox.read_file(path)
            except SandboxError:
                changed[path] = None
        apply_changes(self.graph, changed)
        self.memory.rehydrate(self.graph)

    def _submit(self, info: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, bool]:
        ran_tests = True
        try:
            diff = self.sandbox.diff()
            # the verdict comes from a fresh sandbox holding only the final diff: nothing code ran during the
            # episode left behind (files outside the repo, a daemon, planted git config) can steer it
            grade_fresh = getattr(self.sandbox, "grade_fresh", None)
            if not diff.strip():
                ran_tests = False  # the base tree: unresolved by definition, like the SWE-bench harness's empty patch
                report = TestReport(resolved=False, mode=self.task.grading_mode, error=EMPTY_PATCH)
            elif self.grade_in_fresh_sandbox and callable(grade_fresh):
                report = grade_fresh(diff)
            else:
                report = self.sandbox.run_tests()
        except SandboxError as exc:
            report = TestReport(resolved=False, mode=self.task.grading_mode, error=f"sandbox error: {exc}")
        if ran_tests:
            self._log_test_run("grading", report, None)
        self._grading_log = grading_log(report)
        info["grading"] = report.to_dict()  # the whole report, evidence included, for the trajectory
        if report.tampered:  # the agent sees the word only: evidence would teach it what the checks look at
            return {"resolved": False, "tampered": True, "error": None}, None, False
        return {"resolved": report.resolved, "error": report.error}, report.error, report.resolved

    def _finish(self, reason: str, resolved: bool, forged: bool = False) -> EpisodeSummary:
        """Build the episode's one summary (``self.summary``; ``info["episode"]`` is its dict)."""
        try:
            patch = self.sandbox.diff()
        except SandboxError as exc:
            log.warning("task %s: could not read the final diff: %s", self.task.task_id, exc)
            patch = ""
        verdict = "tampered" if forged else ("resolved" if resolved else "unresolved")
        self.summary = EpisodeSummary.from_dict({
            "task_id": self.task.task_id, "termination_reason": reason, "resolved": resolved,
            "verdict": verdict, "tampered": forged, "episode_return": round(self.episode_return, 6),
            "steps": self.step_count, "max_steps": self.max_steps, "repo_ops": self.repo_ops, "patch": patch,
            "synthesizer": getattr(self.synthesizer, "name", type(self.synthesizer).__name__),
            "localisation": self.localisation.summary() if self.localisation is not None else None,
            "test_output": self._grading_log, **self.stats.to_dict()})
        return self.summary


def grading_log(report: TestReport) -> str:
    """The final graded run as a user reads it (eval keeps it per instance): verdict, exit status, size, log."""
    head = [f"verdict: {report.verdict}", f"mode: {report.mode}", f"rc: {report.rc}",
            f"seconds: {report.seconds:.3f}", f"timed_out: {report.timed_out}"]
    if report.error:
        head.append(f"error: {report.error}")
    if report.output_bytes is not None:
        head.append(f"output_bytes: {report.output_bytes} (the log below is the grader's last part of it)")
    return "\n".join(head) + "\n\n" + report.log_tail
