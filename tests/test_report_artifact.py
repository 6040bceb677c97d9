"""The report as the Prefect UI shows it (the markdown artifact) and as report.md: the result said once, no
training line for an eval that trained nothing, and tables narrow enough for a 1400 px window (a long error or
task id widened a column until the others scrolled out of view)."""

from __future__ import annotations

import re
from pathlib import Path

from graph_planner.config.loader import load_run_config
from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.eval.report import write_report
from graph_planner.eval.results import ResultsStore, TaskResult
from tasks.evaluation import report_artifact_markdown

#: ~8 px a character plus cell padding: the widest table a 1400 px window shows without scrolling.
MAX_TABLE_CHARS = 150
LONG_ERROR = ("Traceback (most recent call last): File \"/usr/lib/python3.11/site-packages/docker/api/client.py\", "
              "line 275, in _raise_for_status: 500 Server Error: Internal Server Error (no space left on device)")


def _eval_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "eval"
    results = [TaskResult(instance_id="graphplanner-samples__invcalc-1", resolved=True, category="resolved", steps=4),
               TaskResult(instance_id="r2e__very-long-organisation-name__very-long-repository-name-0123456789abcdef",
                          status="error", category="sandbox_error", error=LONG_ERROR, steps=0),
               TaskResult(instance_id="graphplanner-samples__minicfg-3", termination_reason="max_steps", steps=4),
               TaskResult(instance_id="graphplanner-samples__invcalc-1", label="baseline:gold", resolved=True,
                          category="resolved", steps=1)]
    store = ResultsStore(directory / "results.jsonl")
    for result in results:
        store.append(result)
    write_report(directory, results, total_tasks=4, run_name="nightly")
    return directory


def _tables(markdown: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    previous = False
    for line in markdown.splitlines():
        is_row = line.startswith("|")
        if is_row:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not previous:
                tables.append([])
            tables[-1].append(cells)
        previous = is_row
    return tables


def _artifact(tmp_path: Path, model: str | None) -> str:
    config = load_run_config(LOCAL_DEBUG_CONFIG)
    directory = _eval_dir(tmp_path)
    return report_artifact_markdown(config, str(tmp_path / "resolved_config.yaml"), directory, model,
                                    tmp_path / "training_curves.png" if model else None)


def test_the_artifact_says_the_result_once_and_no_training_for_an_eval_that_trained_nothing(tmp_path: Path) -> None:
    markdown = _artifact(tmp_path, model=None)
    assert markdown.count("Resolved **1/2** (50.0%) of 4 tasks; 1 errored") == 1, markdown
    assert "training" not in markdown.lower().replace("training curves", "")
    assert "Training curves" not in markdown
    assert markdown.count("Resolved **") == 1
    assert "| task | label |" in markdown and "![Outcomes](data:image/png;base64," in markdown


def test_the_artifact_of_a_trained_model_names_its_training(tmp_path: Path) -> None:
    markdown = _artifact(tmp_path, model=str(tmp_path / "checkpoints" / "step_3"))
    assert markdown.count("Resolved **1/2**") == 1
    assert "- training: local backend, " in markdown


def test_report_tables_fit_a_1400_px_window(tmp_path: Path) -> None:
    for markdown in (_artifact(tmp_path, model=None), (tmp_path / "eval" / "report.md").read_text()):
        tables = _tables(markdown)
        assert len(tables) >= 2
        for table in tables:
            widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(len(table[0]))]
            assert sum(widths) <= MAX_TABLE_CHARS, (widths, table[0])
    report_md = (tmp_path / "eval" / "report.md").read_text()
    assert "Traceback (most recent" in report_md and "no space left" not in report_md  # cut, kept in jsonl
    assert "r2e__very-long-organisation-name__very" in report_md
