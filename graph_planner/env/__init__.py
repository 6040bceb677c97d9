"""PlannerEnv: the planner's actions, memories W/M, observations, repair cycle, rewards and replay."""
