"""The trajectory SFT warm start: chat examples from planner trajectories, TRL's SFTTrainer, ``gp sft``."""
