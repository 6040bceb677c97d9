"""``python -m flows.demo`` (what ``make demo`` runs): the pipeline flow on the learning config (bundled tasks,
local sandbox, toy model, ephemeral Prefect: SFT warm start -> local GRPO with the oracle synthesiser -> eval), then
the base / SFT / GRPO before-after table, the GRPO phase's own reward curve, where the report is and how many
steps ran versus came from the cache (a second run re-executes no cached step).

``--config configs/experiments/local_debug.yaml`` runs the plumbing-only embedded default (no SFT, 3 GRPO steps of
the untrained toy model: nothing learns, every step is exercised)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from flows import LEARNING_CONFIG


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.demo", description=__doc__)
    parser.add_argument("--config", default=LEARNING_CONFIG, help="run config YAML (default: %(default)s)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="dotted override, repeatable: --set training.total_steps=1")
    args = parser.parse_args(argv)
    # Prefect's own settings, defaulted for a laptop: a loaded 2-core box can need more than the 20 s default to
    # start the ephemeral API server, and the demo sends no telemetry.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect creates PREFECT_HOME but not its parents; on a fresh clone `.cache/` does not exist yet, and the
    # ephemeral server's SQLite then cannot open (a 2-minute "Timed out ... ephemeral Prefect API server").
    if os.environ.get("PREFECT_HOME"):
        Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)

    from flows.pipeline import pipeline
    from flows.run_stats import step_counts
    from tasks.config import overrides_to_dict

    try:
        overrides_to_dict(args.overrides)  # refuse secrets before Prefect stores them as flow parameters
    except ValueError as exc:
        parser.error(str(exc))

    from graph_planner.training.background_imports import DEMO_IMPORTS, import_in_background

    import_in_background(*DEMO_IMPORTS)  # ~8 s of imports the steps need, while Prefect's server starts (~10 s)
    state = pipeline(config_path=args.config, overrides=args.overrides, return_state=True)
    counts = step_counts(state.state_details.flow_run_id)
    print(f"steps: {counts.line()}")
    if counts.ran:
        print(f"  ran: {', '.join(counts.ran)}")
    if not state.is_completed():
        print(f"pipeline finished in state {state.name}: {state.message}", file=sys.stderr)
        return 1
    report = Path(state.result())
    learning = report.parent / "learning" / "learning.json"
    if learning.is_file():  # the before/after table (eval.compare_stages): base -> SFT warm start -> GRPO
        from graph_planner.training.learning_report import summary_lines

        data = json.loads(learning.read_text(encoding="utf-8"))
        print(f"learning ({data['synthesizer']} synthesiser, {data['episodes_per_task']} episode(s) per task):")
        for line in summary_lines(data):
            print(f"  {line}")
        print(f"  {data['note']}")
    print(f"report: {report.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
