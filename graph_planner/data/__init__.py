"""The task data pipeline: sources -> TaskRecord JSONL + instances -> docker manifest -> verl/rLLM registration.

Kept import-light (no `datasets` here): most callers only need TaskRecord and the JSONL reader.
"""

from graph_planner.data.io import read_task_records, write_task_records
from graph_planner.data.record import TaskRecord

__all__ = ["TaskRecord", "read_task_records", "write_task_records"]
