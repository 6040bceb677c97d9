"""`gp grade` with duplicate instance ids grades the last row, as the SWE-bench harness does (it builds a dict of
the rows), and warns naming both lines: the same predictions file grades the same everywhere."""

from __future__ import annotations

import json

from graph_planner.validation.grade import DUPLICATE, read_predictions


def test_the_last_of_duplicate_instance_ids_wins_with_a_warning_naming_both_lines(tmp_path):
    path = tmp_path / "preds.jsonl"
    rows = [{"instance_id": "a", "model_patch": "first"}, {"instance_id": "b", "model_patch": "b"},
            {"instance_id": "a", "model_patch": "last"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    predictions, problems = read_predictions(path)
    assert predictions["a"]["model_patch"] == "last"
    assert list(predictions) == ["b", "a"]  # graded in the order of the rows that count
    [problem] = problems
    assert DUPLICATE in problem and "line 3" in problem and "line 1" in problem


def test_the_harness_reads_duplicates_the_same_way(tmp_path):
    """What swebench.harness.run_evaluation does with the rows it loaded (its own code, not a copy)."""
    from swebench.harness.utils import get_predictions_from_file

    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps({"instance_id": "a", "model_name_or_path": "m", "model_patch": p}) + "\n"
                            for p in ("first", "last")))
    harness_rows = get_predictions_from_file(str(path), "princeton-nlp/SWE-bench_Verified", "test")
    harness = {pred["instance_id"]: pred for pred in harness_rows}  # as run_evaluation.main does
    ours, _ = read_predictions(path)
    assert ours["a"]["model_patch"] == harness["a"]["model_patch"] == "last"
