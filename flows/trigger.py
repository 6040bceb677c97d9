"""``python -m flows.trigger DEPLOYMENT``: start a deployment run the way CI does, but refuse input that cannot run.

`prefect deployment run` creates the run before anything reads its input: an unknown parameter name creates a run
that Crashes on the worker, a bad value prints a traceback ending in ``409 Conflict``, and a misspelt override key
fails ~12 s later. This checks, before creating anything, the deployment name (closest names offered), every
``--param`` name and value against the deployment's parameter schema (the one the UI form and the server use), and
the run config with the overrides (same loader as the flow; the error names the key and the closest real keys).
Each refusal is one line and exit 2. It prints the run's UI URL at once; with ``--watch`` it prints each state the
run enters and, when it fails, the state's message and the command that shows its logs.

    python -m flows.trigger pipeline/pipeline --set training.total_steps=1 --watch
    python -m flows.trigger evaluate/nightly-eval --param limit=2 --watch

Exit codes: 0 completed (or created, without --watch), 1 the run failed / crashed / was cancelled or the watch
timed out, 2 refused before creating the run.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from pathlib import Path
from typing import Any

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


class Refused(Exception):
    """Input that cannot make a run that starts; the message is the one line the user sees."""


def _param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with the value read as JSON when it parses, else as a string (as `prefect deployment run`)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param wants KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def check_config(config_path: str, overrides: list[str]) -> str | None:
    """The reason the flow's resolve-config step would fail with these inputs, or None when it would pass."""
    from graph_planner.config.loader import ConfigError, load_run_config
    from tasks.config import overrides_to_dict

    if not Path(config_path).is_file():
        return f"config file {config_path!r} not found (relative paths are from {Path.cwd()})"
    try:
        load_run_config(config_path, cli_overrides=overrides_to_dict(overrides), write=False)
    except (ConfigError, ValueError) as exc:
        return str(exc)
    return None


def _expected(schema: dict[str, Any]) -> str:
    """What a parameter's JSON schema accepts, in words: ``integer or null``, ``array of string``."""
    options = schema.get("anyOf") or [schema]
    words = []
    for option in options:
        kind = option.get("type", "any value")
        if kind == "array" and isinstance(option.get("items"), dict):
            kind = f"array of {option['items'].get('type', 'any value')}"
        words.append(kind)
    return " or ".join(dict.fromkeys(words))


def check_parameters(schema: dict[str, Any], given: dict[str, Any], parameters: dict[str, Any]) -> None:
    """Refuse unknown names in ``given`` and any value of ``parameters`` the deployment's schema rejects (the same
    validator the server applies when it answers 409)."""
    from prefect.utilities.schema_tools.validation import validate

    properties: dict[str, Any] = schema.get("properties") or {}
    for name in given if properties else ():  # a deployment without a schema takes any name
        if name not in properties:
            raise Refused(f"unknown parameter {name!r}{_did_you_mean(name, list(properties))} "
                          f"(parameters: {', '.join(properties)})")
    errors = validate(parameters, schema, ignore_required=True)
    if errors:
        error = errors[0]
        name = str(error.path[0]) if error.path else ""
        if name in properties:
            raise Refused(f"parameter {name}={json.dumps(parameters[name])}: expected {_expected(properties[name])} "
                          f"({properties[name].get('description') or 'no description'})")
        raise Refused(f"parameters rejected by the deployment's schema: {error.message}")


def find_deployment(client: Any, name: str) -> Any:
    """The deployment ``FLOW/DEPLOYMENT``; an unknown one is refused with the closest existing names."""
    from prefect.exceptions import ObjectNotFound

    if "/" in name:
        try:
            return client.read_deployment_by_name(name)
        except ObjectNotFound:
            pass
    flows = {flow.id: flow.name for flow in client.read_flows()}
    names = sorted(f"{flows.get(d.flow_id, '?')}/{d.name}" for d in client.read_deployments())
    by_short = [full for full in names if full.split("/", 1)[1] == name]
    hint = f"; did you mean {by_short[0]}?" if len(by_short) == 1 else _did_you_mean(name, names)
    raise Refused(f"no deployment {name!r} on {_api_url()}{hint} "
                  f"(deployments: {', '.join(names) or 'none; run scripts/prefect-local.sh start or make deploy'})")


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or "(PREFECT_API_URL unset: an ephemeral server)"


def run_url(flow_run_id: Any) -> str:
    """The run's page in the Prefect UI (PREFECT_UI_URL, else the API URL without ``/api``)."""
    from prefect.utilities.urls import url_for

    api = _api_url()
    default = api[: -len("/api")] if api.endswith("/api") else api
    return url_for("flow-run", obj_id=flow_run_id, default_base_url=default) or f"{default}/runs/flow-run/{flow_run_id}"


def watch(flow_run_id: Any, timeout_s: float, poll_s: float = 1.0) -> int:
    """Print every state the run enters until a final one; 0 when it completed, else 1 with the reason."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    seen = None
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(flow_run_id)
            state = run.state
            if state is not None and state.id != seen:
                seen = state.id
                print(f"{time.strftime('%H:%M:%S')} {run.name}: {state.name}", flush=True)
            if state is not None and state.type.value in FINAL:
                break
            if time.monotonic() > deadline:
                print(f"watch timed out after {timeout_s:.0f} s; run {run.name} ({flow_run_id}) is "
                      f"{state.name if state else 'unknown'}", file=sys.stderr)
                return 1
            time.sleep(poll_s)
    print(f"flow run {run.name} ({flow_run_id}) finished in state {state.name}")
    if state.type.value == "COMPLETED":
        return 0
    print(f"reason: {state.message or '(no message)'}", file=sys.stderr)
    print(f"logs:   prefect flow-run logs {flow_run_id}", file=sys.stderr)
    return 1


def create_run(deployment_name: str, config: str | None, overrides: list[str], params: dict[str, Any]) -> Any:
    """Check everything, then create the flow run; raises `Refused` before creating anything."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deployment = find_deployment(client, deployment_name)
        schema = deployment.parameter_openapi_schema or {}
        given = dict(params)
        if config:
            given["config_path"] = config
        parameters = {**(deployment.parameters or {}), **given}
        check_parameters(schema, {**given, **({"overrides": overrides} if overrides else {})}, parameters)
        if overrides:  # --set items are strings: the list stays valid
            parameters["overrides"] = [*parameters.get("overrides", []), *overrides]
        if "config_path" in (schema.get("properties") or {}):
            problem = check_config(parameters.get("config_path", ""), parameters.get("overrides", []))
            if problem:
                raise Refused(problem)
        return client.create_flow_run_from_deployment(deployment.id, parameters=parameters)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.trigger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deployment", help="FLOW/DEPLOYMENT, e.g. pipeline/pipeline")
    parser.add_argument("--config", help="config_path parameter (default: the deployment's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted config override, repeatable (the overrides parameter)")
    parser.add_argument("--param", action="append", default=[], type=_param, metavar="KEY=VALUE",
                        help="another flow parameter (JSON value or string), repeatable: --param limit=2")
    parser.add_argument("--watch", action="store_true", help="follow the run to its end, printing each state")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to watch (default %(default)s)")
    args = parser.parse_args(argv)

    import httpx

    try:
        run = create_run(args.deployment, args.config, args.overrides, dict(args.param))
    except Refused as exc:
        one_line = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"refused, no run created: {one_line}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:  # server down or answering an error: nothing was created
        print(f"refused, no run created: the Prefect API at {_api_url()} did not answer ({exc})", file=sys.stderr)
        return 2
    print(f"created flow run {run.name} ({run.id}) of {args.deployment}")
    print(f"UI: {run_url(run.id)}", flush=True)
    return watch(run.id, args.timeout) if args.watch else 0


if __name__ == "__main__":
    sys.exit(main())
