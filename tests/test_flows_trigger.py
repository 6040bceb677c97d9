"""``python -m flows.trigger`` against the session's Prefect test server holding the real deployments: every bad input
is one line and exit 2 with no run created; a good one prints the run's UI URL at once, and ``--watch`` prints
each state the run enters. (No worker here: the watch test moves the run's states itself, as a worker would; the
real worker's run is watched in tests/test_flows_server.py.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flows import trigger

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = "evaluate/nightly-eval"


@pytest.fixture
def deployments(harness_deployments: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(ROOT)  # the deployments' config_path is relative to the project root, as on the worker
    return harness_deployments


def run_count(deployment: Any) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with get_client(sync_client=True) as client:
        return len(client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))))


def refused(capsys: pytest.CaptureFixture[str], deployments: dict[str, Any], *argv: str) -> str:
    """Run the trigger on bad input: exit 2, no run created, and the reason as one line on stderr."""
    before = run_count(deployments[NIGHTLY])
    assert trigger.main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert run_count(deployments[NIGHTLY]) == before, "a refused trigger created a run"
    assert out == "" and err.count("\n") == 1 and err.startswith("refused, no run created: "), (out, err)
    return err


def test_a_misspelt_deployment_is_refused_with_the_closest_name(capsys, deployments) -> None:
    err = refused(capsys, deployments, "evaluate/nightly-evl", "--param", "limit=1")
    assert "no deployment 'evaluate/nightly-evl'" in err and "did you mean evaluate/nightly-eval?" in err


def test_a_deployment_named_without_its_flow_is_refused_with_the_full_name(capsys, deployments) -> None:
    err = refused(capsys, deployments, "nightly-eval")
    assert "did you mean evaluate/nightly-eval?" in err


def test_an_unknown_parameter_name_is_refused_with_the_closest_name(capsys, deployments) -> None:
    err = refused(capsys, deployments, NIGHTLY, "--param", "limt=2")
    assert "unknown parameter 'limt'; did you mean limit?" in err
    assert "config_path, overrides, dataset, limit, model" in err


def test_a_value_of_the_wrong_type_is_refused_with_the_expected_type(capsys, deployments) -> None:
    err = refused(capsys, deployments, NIGHTLY, "--param", "limit=two")
    assert 'parameter limit="two": expected integer or null' in err
    err = refused(capsys, deployments, NIGHTLY, "--param", "overrides=eval.limit=1")
    assert "parameter overrides=" in err and "expected array of string" in err


def test_a_misspelt_override_key_is_refused_with_the_closest_key(capsys, deployments) -> None:
    err = refused(capsys, deployments, NIGHTLY, "--set", "eval.limt=1")
    assert "did you mean eval.limit" in err


def test_a_missing_config_file_is_refused(capsys, deployments) -> None:
    err = refused(capsys, deployments, NIGHTLY, "--config", "configs/experiments/nope.yaml")
    assert "config file 'configs/experiments/nope.yaml' not found" in err


def test_an_unreachable_server_is_one_line_not_a_traceback(capsys, deployments) -> None:
    import socket

    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing answers there
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
        started = time.monotonic()
        assert trigger.main([NIGHTLY]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"127.0.0.1:{port}" in err and "did not answer" in err, err
    assert time.monotonic() - started < 60


def test_a_good_trigger_creates_the_run_with_its_parameters_and_prints_its_ui_url(capsys, deployments) -> None:
    from prefect.client.orchestration import get_client

    before = run_count(deployments[NIGHTLY])
    assert trigger.main([NIGHTLY, "--param", "limit=2", "--set", "eval.batch_size=1"]) == 0
    out, err = capsys.readouterr()
    assert run_count(deployments[NIGHTLY]) == before + 1
    created, url = out.splitlines()
    run_id = created.split("(")[1].split(")")[0]
    assert url.startswith("UI: http://") and url.endswith(f"/runs/flow-run/{run_id}"), out
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
    assert run.parameters["limit"] == 2
    assert run.parameters["overrides"] == ["eval.batch_size=1"]
    assert run.parameters["config_path"] == "configs/experiments/local_debug.yaml"  # the deployment's own


def _drive_states_in_place_of_a_worker(deployment_id: Any, before: int, message: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.states import Failed, Pending, Running

    flt = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
    with get_client(sync_client=True) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(deployment_filter=flt)
            if len(runs) > before:
                break
            time.sleep(0.2)
        newest = max(runs, key=lambda run: run.created)
        for state in (Pending(), Running(), Failed(message=message)):
            time.sleep(2.5)  # longer than the watcher's poll, so it sees every state
            client.set_flow_run_state(newest.id, state, force=True)


def test_watch_prints_each_state_then_the_failure_reason_and_logs_command(capsys, deployments) -> None:
    deployment = deployments[NIGHTLY]
    driver = threading.Thread(target=_drive_states_in_place_of_a_worker,
                              args=(deployment.id, run_count(deployment), "dataset missing/tasks.jsonl not found"))
    driver.start()
    try:
        code = trigger.main([NIGHTLY, "--param", "limit=1", "--watch", "--timeout", "120"])
    finally:
        driver.join(timeout=90)
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith("created flow run ") and lines[1].startswith("UI: http://")
    states = [line.rsplit(": ", 1)[1] for line in lines[2:-1]]
    assert states == ["Scheduled", "Pending", "Running", "Failed"], out
    assert lines[-1].endswith("finished in state Failed")
    assert "reason: dataset missing/tasks.jsonl not found" in err
    assert "logs:   prefect flow-run logs " in err
