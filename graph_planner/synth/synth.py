"""`synthesize`: repair tasks from any Python repository with a pytest suite, by injecting bugs and keeping those the
tests catch (SWE-smith style), written in the prepared layout of every other source (``<out>/synth/``).

Per repository: check the input (one clear error, nothing written), run the clean suite twice, pick targets from
the code graph, make every modifier's candidates per target, pick ``per_target`` of them with the seed, validate
them in parallel sandboxes, commit each kept bug as a root commit of the task repository, and split the tasks by
code location. Everything is staged in a temp dir and written at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from graph_planner.config.schema import RunConfig, SandboxConfig
from graph_planner.data.io import write_json
from graph_planner.data.prepare import PrepareSummary, SourceSummary, write_source
from graph_planner.data.record import TaskRecord
from graph_planner.data.sources.base import RejectedRow
from graph_planner.grading.parse import get_parser
from graph_planner.synth.modifiers import Mutation, mutations_for
from graph_planner.synth.split import split_by_location
from graph_planner.synth.targets import Target, find_targets, is_test_path, repo_graph
from graph_planner.synth.taskrepo import TaskRepo, synth_image, tracked_files
from graph_planner.synth.validate import (
    SynthInputError,
    Verdict,
    clean_task,
    pool_baseline,
    sandbox_pool,
    validate_candidates,
)

SOURCE = "synth"
#: progress(stage, done, total)
Progress = Callable[[str, int, int], None]


@dataclass
class SynthOptions:
    seed: int = 0
    per_target: int = 2
    max_tasks: int | None = None
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    val_frac: float = 0.15
    test_frac: float = 0.15
    max_steps: int = 30
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    #: "local" (threads on this machine) or "ray" (synth/ray_validate.py: ``ray_config`` names the cluster)
    executor: str = "local"
    ray_config: RunConfig | None = None


@dataclass
class SynthStats:
    """What a run cost: seconds by phase (the benchmark's breakdown) and candidate counts."""

    candidates: int = 0
    judged: int = 0
    passed: int = 0  # judged candidates that validated (more than max_tasks when the last window overshoots)
    validated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    mutation_s: float = 0.0
    base_run_s: float = 0.0
    coverage_s: float = 0.0  # the traced clean run that finds the executed lines
    mutated_run_s: float = 0.0
    commit_s: float = 0.0
    wall_s: float = 0.0

    def add(self, other: SynthStats) -> None:
        for name in ("candidates", "judged", "passed", "validated", "mutation_s", "base_run_s", "coverage_s",
                     "mutated_run_s", "commit_s", "wall_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rejected.update(other.rejected)


@dataclass
class SynthResult:
    summary: SourceSummary
    records: list[TaskRecord]
    stats: SynthStats


def check_repo(repo: Path) -> None:
    """Refuse input that cannot give trustworthy tasks, before anything runs or is written."""
    if not repo.is_dir():
        raise SynthInputError(f"{repo}: not a directory")
    files = tracked_files(repo)
    if files is not None:
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=repo,
                                capture_output=True, text=True, check=False)
        if status.returncode != 0:
            raise SynthInputError(f"{repo}: git status failed: {status.stderr.strip()}")
        if status.stdout.strip():
            raise SynthInputError(f"{repo}: the work tree is dirty ({len(status.stdout.splitlines())} changed or "
                                  "untracked path(s)); commit or stash them first, tasks are built from a clean tree")
    else:
        files = [p.relative_to(repo).as_posix() for p in repo.rglob("*.py") if ".git" not in p.parts]
    python = [f for f in files if f.endswith(".py")]
    if not python:
        raise SynthInputError(f"{repo}: no Python file; tasks are made from a Python repository with a pytest "
                              "suite")
    if not any(is_test_path(f) and Path(f).name != "conftest.py" for f in python):
        raise SynthInputError(f"{repo}: no test file (tests/, test_*.py or *_test.py); tasks are made from a "
                              "repository with a pytest suite (its tests decide every task)")


def plan_candidates(repo: Path, name: str, seed: int, per_target: int,
                    executed: dict[str, set[int]] | None = None) -> tuple[list[Mutation], list[Target]]:
    """``per_target`` mutations of each covered target, chosen with the seed; targets in a seeded order and their
    candidates interleaved, so a small ``max_tasks`` still spreads over the code. Deduplicated by result. With
    ``executed`` (lines the clean suite runs), only mutations on executed lines are candidates."""
    targets = find_targets(repo_graph(repo, name))
    rng = random.Random(seed)
    order = list(targets)
    rng.shuffle(order)
    per: list[list[Mutation]] = []
    for target in order:
        data = (repo / target.path).read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        options = mutations_for(data, target.path, target.node_id, target.kind, target.qualname)
        if executed is not None:
            options = [m for m in options if m.line in executed.get(m.path, ())]
        pick = random.Random(f"{seed}\0{target.node_id}")
        per.append(pick.sample(options, min(per_target, len(options))))
    seen: set[str] = set()
    out: list[Mutation] = []
    for rank in range(per_target):
        for chosen in per:
            if rank < len(chosen) and chosen[rank].key not in seen:
                seen.add(chosen[rank].key)
                out.append(chosen[rank])
    return out, order


def problem_statement(repo: str, verdict: Verdict) -> tuple[str, str]:
    """(title, body) giving symptoms only: the failing tests and their messages, never the location."""
    failing = verdict.fail_to_pass
    title = f"{failing[0]} fails" if len(failing) == 1 else f"{len(failing)} tests fail in {repo}"
    lines = [f"After a recent change, {len(failing)} test(s) of {repo} fail:", ""]
    for test in failing[:10]:
        message = " ".join(verdict.symptoms.get(test, "").split())[:300]
        lines.append(f"- `{test}`" + (f": {message}" if message and message not in ("FAILED", "ERROR") else ""))
    if len(failing) > 10:
        lines.append(f"- ... and {len(failing) - 10} more")
    lines += ["", "The other tests still pass. Please fix the code so that these tests pass again."]
    return title, "\n".join(lines)


def synthesize_repo(repo: Path, staging: Path, options: SynthOptions,
                    progress: Progress | None = None,
                    ) -> tuple[list[TaskRecord], list[tuple[str, RejectedRow]], SynthStats]:
    """Tasks and discarded candidates (with their location) of one repository, splits not yet assigned; the task
    repository is built under ``staging``."""
    start = time.monotonic()
    repo = repo.resolve()
    name = repo.name
    stats = SynthStats()
    check_repo(repo)
    base_task = clean_task(repo, name)
    size = 1 if options.executor == "ray" else max(1, options.workers)
    with sandbox_pool(base_task, options.sandbox, size) as pool:
        base, executed, stats.coverage_s = pool_baseline(pool, options.sandbox)
        stats.base_run_s = base.seconds
        t0 = time.monotonic()
        candidates, _ = plan_candidates(repo, name, options.seed, options.per_target, executed)
        stats.mutation_s = time.monotonic() - t0
        stats.candidates = len(candidates)
        if not candidates:
            raise SynthInputError(f"{repo}: no function the tests reach could be mutated on a line the tests run")
        limit = options.max_tasks
        done = 0

        def on_done(verdict: Verdict) -> None:
            nonlocal done
            done += 1
            if progress:
                progress(f"synth {name}", done, len(candidates))

        if progress:
            progress(f"synth {name}", 0, len(candidates))
        if options.executor == "ray":
            from graph_planner.synth.ray_validate import validate_on_ray

            verdicts = validate_on_ray(base_task, options.sandbox, base, candidates,
                                       options.ray_config or RunConfig(), on_done)
        else:
            verdicts = validate_candidates(base_task, options.sandbox, base, candidates, options.workers, limit,
                                           on_done, pool=pool)
    judged = [v for v in verdicts if v is not None]
    stats.judged = len(judged)
    stats.passed = sum(1 for v in judged if v.reason is None)
    stats.mutated_run_s = sum(v.seconds for v in judged)
    kept = [v for v in judged if v.reason is None][:limit]
    t0 = time.monotonic()
    task_repo = TaskRepo(repo, staging / name)
    records = []
    for verdict in kept:
        m = verdict.mutation
        task_id = f"synth__{name}-{m.key[:10]}"
        commit = task_repo.add_task(m.path, m.mutated, task_id, f"synth {task_id}")
        title, body = problem_statement(name, verdict)
        records.append(TaskRecord(
            task_id=task_id, source=SOURCE, split="train", repo=name, base_commit=commit, problem_statement=body,
            title=title, max_steps=options.max_steps, repo_path=str(task_repo.path), fail_to_pass=verdict.fail_to_pass,
            pass_to_pass=verdict.pass_to_pass, gold_patch=task_repo.reverse_diff(commit),
            metadata={"location": f"{name}:{m.target}", "synth": {
                "modifier": m.modifier, "target": m.target, "path": m.path, "line": m.line, "seed": options.seed}}))
    task_repo.finish()
    image = synth_image(name, (r.base_commit for r in records))
    records = [r.model_copy(update={"image": image}) for r in records]
    stats.commit_s = time.monotonic() - t0
    stats.validated = len(records)
    stats.rejected.update(v.reason for v in judged if v.reason is not None)
    rejected = [(f"{name}:{v.mutation.target}",
                 RejectedRow(SOURCE, "", i, f"synth__{name}-{v.mutation.key[:10]}",
                             f"{v.reason} ({v.mutation.modifier} in {v.mutation.target}, line {v.mutation.line})"))
                for i, v in enumerate(verdicts) if v is not None and v.reason is not None]
    stats.wall_s = time.monotonic() - start
    return records, rejected, stats


def synthesize(repos: Sequence[str | Path], options: SynthOptions,
               progress: Progress | None = None) -> tuple[list[TaskRecord], list[RejectedRow], SynthStats, Path]:
    """Tasks of every repository with splits assigned; the caller writes them (records point into the staging dir
    returned, which the caller removes)."""
    # the graders' log parser (swebench: a ~2 s import) is needed once the first clean runs end: import it meanwhile
    threading.Thread(target=get_parser, args=("pytest",), name="synth-warm-parser", daemon=True).start()
    staging = Path(tempfile.mkdtemp(prefix="gp-synth-"))
    records: list[TaskRecord] = []
    rejected: list[tuple[str, RejectedRow]] = []
    stats = SynthStats()
    names = [Path(r).resolve().name for r in repos]
    if len(set(names)) != len(names):
        raise SynthInputError(f"two repositories share a directory name ({names}); task ids would collide")
    try:
        for repo in repos:
            recs, rej, st = synthesize_repo(Path(repo), staging, options, progress)
            records += recs
            rejected += rej
            stats.add(st)
    except BaseException:  # bad input, a signal: nothing half-written stays behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    splits = split_by_location((r.metadata["location"] for r in records), options.seed, options.val_frac,
                               options.test_frac)
    records = [r.model_copy(update={"split": splits[r.metadata["location"]]}) for r in records]
    # a discarded candidate is listed under its location's split (train when the location gave no task)
    rows = [dataclasses.replace(row, split=splits.get(loc, "train")) for loc, row in rejected]
    return records, rows, stats, staging


def write_synth(out: str | Path, records: list[TaskRecord], rejected: list[RejectedRow],
                source: str = SOURCE) -> SourceSummary:
    """Write ``<out>/<source>/`` and record it in ``<out>/summary.json`` (other sources' entries kept)."""
    out = Path(out)
    summary = write_source(out, source, records, rejected)
    path = out / "summary.json"
    whole = PrepareSummary(out_dir=str(out))
    if path.is_file():
        try:
            whole = PrepareSummary.model_validate({**json.loads(path.read_text(encoding="utf-8")), "out_dir": str(out)})
        except ValueError:
            pass
    whole.sources[source] = summary
    write_json(path, whole.model_dump(mode="json", exclude={"out_dir"}))
    return summary
