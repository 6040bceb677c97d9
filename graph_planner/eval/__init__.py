"""Evaluation: the eval stage as one plain function (``api.evaluate_dataset``), the resumable runner over N
concurrent sandboxes, per-task results and predictions.jsonl, reports and plots, and the official swebench
harness as a second opinion."""
