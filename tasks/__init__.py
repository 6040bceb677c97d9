"""Prefect tasks: thin orchestration wrappers (cache policy, retries, artifacts) over plain ``graph_planner``
functions — one module per stage: config, data, images, preflight, training, evaluation."""
