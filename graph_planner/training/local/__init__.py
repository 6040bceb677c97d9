"""The local engine: one process, an HF policy, env rollouts through the episode runner, GRPO steps on verl's
``core_algos`` (graph_planner.training.grpo), checkpoints and resume."""
