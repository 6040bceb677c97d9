"""Chat models (OpenAI-compatible HTTP, local HF), patch synthesisers, the toy model and `gp serve`."""
