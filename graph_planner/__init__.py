"""Graph Planner: train and evaluate code-graph planner agents that repair real repositories."""

__version__ = "0.1.0"
