"""Adapters that let outside RL frameworks drive Graph Planner episodes: the verl agent loop
(``graph_planner.training.agent_loop``) and rLLM's BaseAgent/BaseEnv (``graph_planner.integrations.rllm``).

Both build episodes from a registered dataset row the same way (:mod:`.episode_setup`) and cap concurrent
sandboxes per node the same way (:mod:`.sandbox_slots`).
"""
