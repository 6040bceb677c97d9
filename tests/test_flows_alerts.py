"""``python -m flows.alerts``: the automation it creates on the session's Prefect test server POSTs a failed or
crashed nightly-eval run to a webhook (a recording HTTP server here), and nothing for a completed run or another
deployment's failure. Runs are moved through their states by the test, as a worker would (no worker here)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from prefect_fixtures import recording_webhook

from flows import alerts


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with recording_webhook() as hook:
        yield hook


def finish_run(deployment: Any, final: Any) -> Any:
    """A run of ``deployment`` taken Pending -> Running -> ``final``, as the worker and the flow would."""
    from prefect.client.orchestration import get_client
    from prefect.states import Pending, Running

    with get_client(sync_client=True) as client:
        run = client.create_flow_run_from_deployment(deployment.id)
        for state in (Pending(), Running(), final):
            client.set_flow_run_state(run.id, state, force=True)
        return run


def wait_for(received: list, count: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.5)


@pytest.mark.slow  # the server's trigger and action services take their time: ~20-45 s on a loaded 2-core box
def test_failed_and_crashed_nightly_runs_are_posted_to_the_webhook(harness_deployments, webhook, capsys) -> None:
    from prefect.states import Completed, Crashed, Failed

    url, received = webhook
    assert alerts.main(["--webhook-url", url]) == 0
    assert "evaluate/nightly-eval" in capsys.readouterr().out
    assert alerts.main(["--webhook-url", url]) == 0  # idempotent: replaced, not doubled (one POST per failure below)
    nightly, train = harness_deployments["evaluate/nightly-eval"], harness_deployments["train/train"]
    time.sleep(3)  # the server's trigger service loads new automations on its own clock

    finish_run(nightly, Completed())
    finish_run(train, Failed(message="not a nightly run"))
    failed = finish_run(nightly, Failed(message="dataset missing/tasks.jsonl not found"))
    wait_for(received, 1)
    assert len(received) == 1, received
    (post,) = received
    body = post["body"]
    assert post["path"] == "/hook" and post["content_type"] == "application/json"
    assert (body["deployment"], body["flow_run_id"], body["state"]) == ("evaluate/nightly-eval", str(failed.id), "Failed")
    assert body["message"] == "dataset missing/tasks.jsonl not found"
    # the run's UI page; the test server runs without a UI, so Prefect knows no UI URL there and it is empty
    assert body["url"] == "" or body["url"].endswith(f"/runs/flow-run/{failed.id}"), body["url"]
    assert body["logs"] == f"prefect flow-run logs {failed.id}"
    assert "evaluate/nightly-eval" in body["text"] and "Failed: dataset missing/tasks.jsonl not found" in body["text"]

    crashed = finish_run(nightly, Crashed(message="Process exited with status code: -9"))
    wait_for(received, 2)
    assert [post["body"]["flow_run_id"] for post in received] == [str(failed.id), str(crashed.id)]
    assert received[1]["body"]["state"] == "Crashed"
    time.sleep(2)
    assert len(received) == 2, "a completed run or another deployment's failure was posted"


def test_bad_input_is_refused_before_changing_the_server(harness_deployments, capsys) -> None:
    assert alerts.main(["--webhook-url", "hooks.example/x"]) == 2
    assert "http(s) URL" in capsys.readouterr().err
    assert alerts.main(["--webhook-url", "http://127.0.0.1:9/x", "--deployment", "evaluate/nightly"]) == 2
    assert "no deployment 'evaluate/nightly'" in capsys.readouterr().err
