"""``python -m flows.alerts --webhook-url URL``: a failed or crashed nightly eval reaches someone.

Creates (or replaces) a Prefect automation on the server ``PREFECT_API_URL`` points at: when a run of the named
deployments (default ``evaluate/nightly-eval``) enters Failed or Crashed, the server POSTs a JSON message to the
webhook (a Webhook block holds the URL, so the URL is not shown in the automation). The body carries ``text`` (what
Slack and Mattermost incoming webhooks display), the run, its state and message, the run's UI URL and the command
that prints its logs. Run it once per server, after the deployments exist (``scripts/prefect-local.sh start
--alert-webhook URL`` does it for the local one).

    python -m flows.alerts --webhook-url https://hooks.slack.com/services/...
    python -m flows.alerts --webhook-url http://alerts.internal/prefect --deployment train/train

Exit codes: 0 created, 2 refused (an unknown deployment, a URL that is not http(s)).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import urlparse

#: States whose entry notifies; a cancelled run was stopped by someone, who knows already.
ALERT_STATES = ("Failed", "Crashed")
DEFAULT_DEPLOYMENTS = ("evaluate/nightly-eval",)

#: The webhook body (a Jinja template the server renders with the run, its flow and deployment).
PAYLOAD = """{
  "text": {{ ("Prefect: " ~ flow.name ~ "/" ~ deployment.name ~ " run " ~ flow_run.name ~ " ended "
             ~ flow_run.state.name ~ ": " ~ (flow_run.state.message or "no message") ~ " " ~ ((flow_run|ui_url) or ""))
            | tojson }},
  "deployment": {{ (flow.name ~ "/" ~ deployment.name) | tojson }},
  "flow_run": {{ flow_run.name | tojson }},
  "flow_run_id": "{{ flow_run.id }}",
  "state": {{ flow_run.state.name | tojson }},
  "message": {{ (flow_run.state.message or "") | tojson }},
  "url": {{ ((flow_run|ui_url) or "") | tojson }},
  "logs": "prefect flow-run logs {{ flow_run.id }}"
}"""


def automation_name(deployments: list[str]) -> str:
    return "graph-planner alert: " + ", ".join(deployments)


def create_alert(webhook_url: str, deployments: list[str], block_name: str = "graph-planner-alert-webhook") -> Any:
    """Save the webhook block and (re)create the automation; returns the automation. Raises ValueError on bad
    input, before changing anything on the server."""
    from prefect.blocks.webhook import Webhook
    from prefect.client.orchestration import get_client
    from prefect.events.actions import CallWebhook
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification
    from prefect.exceptions import ObjectNotFound

    if urlparse(webhook_url).scheme not in ("http", "https"):
        raise ValueError(f"--webhook-url must be an http(s) URL, got {webhook_url!r}")
    name = automation_name(deployments)
    with get_client(sync_client=True) as client:
        ids = []
        for deployment in deployments:
            try:
                ids.append(client.read_deployment_by_name(deployment).id)
            except ObjectNotFound:
                raise ValueError(f"no deployment {deployment!r} on this server (deploy first: "
                                 "scripts/prefect-local.sh start, or prefect deploy --all)") from None
        block_id = Webhook(url=webhook_url, method="POST",
                           headers={"Content-Type": "application/json"}).save(block_name, overwrite=True)
        for old in client.read_automations_by_name(name):
            client.delete_automation(old.id)
        automation = AutomationCore(
            name=name,
            description=f"POST a message to a webhook when a run of {', '.join(deployments)} fails or crashes "
                        "(created by python -m flows.alerts).",
            trigger=EventTrigger(
                expect={f"prefect.flow-run.{state}" for state in ALERT_STATES},
                match_related=ResourceSpecification({"prefect.resource.role": "deployment",
                                                     "prefect.resource.id": [f"prefect.deployment.{i}" for i in ids]}),
                posture=Posture.Reactive, threshold=1),
            actions=[CallWebhook(block_document_id=block_id, payload=PAYLOAD)],
        )
        automation_id = client.create_automation(automation)
        return client.read_automation(automation_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.alerts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--webhook-url", required=True, help="where to POST the alert (Slack-style JSON body)")
    parser.add_argument("--deployment", action="append", metavar="FLOW/DEPLOYMENT",
                        help=f"deployment to watch, repeatable (default: {', '.join(DEFAULT_DEPLOYMENTS)})")
    args = parser.parse_args(argv)
    deployments = args.deployment or list(DEFAULT_DEPLOYMENTS)
    try:
        automation = create_alert(args.webhook_url, deployments)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    print(f"automation {automation.name!r} ({automation.id}): runs of {', '.join(deployments)} that end "
          f"{' or '.join(ALERT_STATES)} are POSTed to the webhook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
