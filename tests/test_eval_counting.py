"""How an eval run counts (issue 27 item 8): rates over graded tasks with errors beside them, steps over played
episodes, each task once across resumes (no `12/10`), a lost cluster leaves the report of what finished; and the
pieces the Ray executor's fault handling stands on (probing the head, dropping sandbox templates). No Ray here:
the cluster itself is exercised in tests/test_eval_cluster_faults.py."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from graph_planner.data.record import TaskRecord
from graph_planner.eval.ray_faults import ClusterLost, ClusterWatch, reachable
from graph_planner.eval.report import headline, summarise
from graph_planner.eval.results import ResultsStore, TaskResult
from graph_planner.eval.runner import run_evaluation


def _task(i: int) -> TaskRecord:
    return TaskRecord(task_id=f"t{i}", source="custom", split="test", repo="r", problem_statement="p",
                      test_cmd="pytest")


def _finished(i: int, resolved: bool, steps: int = 4) -> TaskResult:
    return TaskResult(instance_id=f"t{i}", resolved=resolved, category="resolved" if resolved else "unresolved",
                      steps=steps, seconds=2.0)


def _error(i: int) -> TaskResult:
    return TaskResult(instance_id=f"t{i}", status="error", category="sandbox_error", error="ray: NodeDiedError")


def test_rates_are_over_graded_tasks_with_errors_beside_and_steps_over_played_episodes():
    rows = [_finished(0, True, steps=6), _finished(1, True, steps=4), _finished(2, False, steps=2), _error(3),
            _error(4)]
    summary = summarise(rows, total_tasks=6)
    policy = summary["labels"]["policy"]
    assert (policy["tasks"], policy["graded"], policy["errors"], policy["resolved"]) == (5, 3, 2, 2)
    assert policy["resolved_rate"] == pytest.approx(2 / 3)  # not 2/5: an error row has no verdict
    assert policy["mean_steps"] == pytest.approx(4.0)  # not 2.4: the 0-step error rows played nothing
    assert (summary["completed_tasks"], summary["errors"], summary["resolved"]) == (3, 2, 2)
    assert headline(summary).startswith("Resolved **2/3** (66.7%) of 6 tasks; 2 errored")


def _iterate(rows_by_id: dict[str, TaskResult]):
    def results_iter(todo: list[TaskRecord]):
        for task in todo:
            yield rows_by_id[task.task_id]
    return results_iter


def test_a_resume_counts_each_task_once(tmp_path: Path):
    tasks = [_task(i) for i in range(10)]
    store = ResultsStore(tmp_path / "results.jsonl")
    for i in range(8):
        store.append(_finished(i, resolved=i != 0))
    store.append(_error(8))
    store.append(_error(9))
    seen: list[tuple[str, int, int]] = []
    console = Console(stderr=True, width=200, record=True)
    outcome = run_evaluation(tasks, tmp_path, _iterate({"t8": _finished(8, True), "t9": _finished(9, True)}),
                             model_name="m", run_name="resume", console=console,
                             on_result=lambda r, done, total: seen.append((r.instance_id, done, total)))
    assert seen == [("t8", 9, 10), ("t9", 10, 10)]  # was 11/10 and 12/10: the earlier error rows counted too
    assert "10/10" in console.export_text() and "12/10" not in console.export_text()
    assert (outcome.summary["completed_tasks"], outcome.summary["resolved"], outcome.summary["errors"]) == (10, 9, 0)


def test_a_lost_cluster_leaves_the_report_of_what_finished(tmp_path: Path):
    tasks = [_task(i) for i in range(5)]

    def results_iter(todo: list[TaskRecord]):
        yield _finished(0, True)
        yield _finished(1, False)
        raise ClusterLost("the Ray head (GCS 10.0.0.1:6379)", unfinished=3)

    with pytest.raises(ClusterLost) as lost:
        run_evaluation(tasks, tmp_path, results_iter, model_name="m", run_name="lost",
                       console=Console(stderr=True, width=200))
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["completed_tasks"], report["resolved"], report["total_tasks"]) == (2, 1, 5)
    assert len((tmp_path / "predictions.jsonl").read_text().splitlines()) == 2
    line = lost.value.line()
    assert line == (f"gp eval: lost the Ray head (GCS 10.0.0.1:6379) mid-run (3 task(s) in flight or queued dropped; "
                    f"2/5 task(s) graded, report {tmp_path / 'report.json'}); bring the cluster back and run the same "
                    "command again to finish the rest")
    assert "\n" not in line


def test_the_head_counts_as_lost_only_after_the_grace():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        watch = ClusterWatch({"the Ray head": address}, grace_s=3.0)
        assert reachable(address) and watch.check(0, now=0.0) and watch.healthy
    assert not reachable(address)  # closed: refused at once, as the port of a killed GCS
    assert watch.check(4, now=10.0) is False and not watch.healthy  # down, within the grace: wait
    with pytest.raises(ClusterLost) as lost:
        watch.check(4, now=13.5)
    assert lost.value.what == "the Ray head" and lost.value.unfinished == 4


def test_a_blip_shorter_than_the_grace_is_forgiven():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        watch = ClusterWatch({"the Ray head": f"127.0.0.1:{port}"}, grace_s=3.0)
        assert watch.check(0, now=0.0) is False  # bound, not listening yet: refused
        server.listen()
        assert watch.check(0, now=2.0) and watch.healthy
        assert watch.check(0, now=9.0)


def test_drop_templates_removes_this_process_templates(tmp_path: Path, monkeypatch):
    from graph_planner.sandbox import local_copies

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(local_copies, "_templates", {})  # templates other tests of this process built stay theirs
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.py").write_text("x = 1\n")

    def build(repo: Path) -> str:
        for args in (["init", "-q"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base"]):
            subprocess.run(["git", *args], cwd=repo, check=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                              text=True).stdout.strip()

    local_copies.copy_from_template(source, "c", tmp_path / "copy", "run", "t0", build)
    assert len(list(tmp_path.glob("gp-template-*"))) == 1
    assert local_copies.drop_templates() == 1
    assert list(tmp_path.glob("gp-template-*")) == []
    assert local_copies.drop_templates() == 0
