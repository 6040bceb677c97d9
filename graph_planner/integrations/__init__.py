"""Adapters that let outside RL frameworks drive Graph Planner episodes: the verl agent loop
(``graph_planner.training.verl.agent_loop``) and rLLM's BaseAgent/BaseEnv (``graph_planner.integrations.rllm``).

Both read a registered dataset row the same way (:mod:`.episode_setup`: task, run config, dataset dir), build
the env with :func:`graph_planner.env.assembly.build_env` like every other runner, whose sandboxes are capped
per node there (:mod:`graph_planner.sandbox.slots`).
"""
