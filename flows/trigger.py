"""``python -m flows.trigger DEPLOYMENT``: start a deployment run the way CI does, but check the run config first.

`prefect deployment run` creates the run before anything reads the config, so a misspelt override key or a
missing config file fails ~12 s later on the worker, and `--watch` prints only "Failed". This resolves the config
with the overrides locally (same loader as the flow) and refuses to create a run that cannot start (exit 2, the
error names the key and the closest real keys); with ``--watch`` it follows the run and, when it fails, prints the
state's message and the command that shows its logs.

    python -m flows.trigger pipeline/pipeline --set training.total_steps=1 --watch
    python -m flows.trigger evaluate/nightly-eval --param limit=2 --watch

Exit codes: 0 completed (or created, without --watch), 1 the run failed / crashed / was cancelled or the watch
timed out, 2 refused before creating the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--param wants KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


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


def watch(flow_run_id: Any, timeout_s: float) -> int:
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(flow_run_id)
            state = run.state
            if state is not None and state.type.value in FINAL:
                break
            if time.monotonic() > deadline:
                print(f"watch timed out after {timeout_s:.0f} s; run {run.name} ({flow_run_id}) is "
                      f"{state.name if state else 'unknown'}", file=sys.stderr)
                return 1
            time.sleep(2)
    print(f"flow run {run.name} ({flow_run_id}) finished in state {state.name}")
    if state.type.value == "COMPLETED":
        return 0
    print(f"reason: {state.message or '(no message)'}", file=sys.stderr)
    print(f"logs:   prefect flow-run logs {flow_run_id}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.trigger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deployment", help="FLOW/DEPLOYMENT, e.g. pipeline/pipeline")
    parser.add_argument("--config", help="config_path parameter (default: the deployment's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted config override, repeatable (the overrides parameter)")
    parser.add_argument("--param", action="append", default=[], type=_param, metavar="KEY=VALUE",
                        help="another flow parameter (JSON value or string), repeatable: --param limit=2")
    parser.add_argument("--watch", action="store_true", help="follow the run to its end")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to watch (default %(default)s)")
    args = parser.parse_args(argv)

    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(args.deployment)
    parameters = {**(deployment.parameters or {}), **dict(args.param)}
    if args.config:
        parameters["config_path"] = args.config
    parameters["overrides"] = [*parameters.get("overrides", []), *args.overrides]
    problem = check_config(parameters.get("config_path", ""), parameters["overrides"])
    if problem:
        print(f"refused, no run created: {problem}", file=sys.stderr)
        return 2
    run = run_deployment(args.deployment, parameters=parameters, timeout=0)
    print(f"created flow run {run.name} ({run.id}) of {args.deployment}")
    return watch(run.id, args.timeout) if args.watch else 0


if __name__ == "__main__":
    sys.exit(main())
