"""Tasks from any Python repository: bug injection validated by its tests (`gp data synth`) and fix commits of its
history (`gp data mine`). Importing the package registers the ``synth`` source with ``gp data prepare``."""

from graph_planner.synth.source import register

register()
