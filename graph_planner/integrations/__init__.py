"""Adapters that let outside RL frameworks drive Graph Planner episodes: the verl agent loop
(``graph_planner.training.verl.agent_loop``) and rLLM's BaseAgent/BaseEnv (``graph_planner.integrations.rllm``).

Both read a registered dataset row the same way (:mod:`.episode_setup`: task, run config, dataset dir), build
the env with :func:`graph_planner.env.assembly.build_env` like every other runner, and cap concurrent sandboxes
per node the same way (:mod:`.sandbox_slots`).
"""
