"""Ray for training: the private local head a run starts and stops, and the one job-submission path (prepare ->
submit -> follow) on a cluster or that head."""
