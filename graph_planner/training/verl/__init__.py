"""The verl engine: run config -> ``main_ppo`` overrides, the job's entrypoint, the Graph Planner agent loop, verl's
CPU platform / HF rollout and its compatibility patches, and the job's telemetry."""
