"""GRPO training: the local one-process backend and the verl backend (config translation, Ray job)."""
