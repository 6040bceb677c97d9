"""The episode vocabulary every other layer speaks: the planner's actions (``actions``), the text/tool-call wire
format they travel in (``wire``), turns and trajectories (``turns``), patch proposals and repair requests
(``patch``), and command / test-run results (``results``). Plain data and pure functions: it imports nothing from
the rest of graph_planner, so sandbox, grading, models, agents, env and telemetry all import it
downward."""
