"""``training.attention_window``: the planner checkpoint as a sliding-window model, for the verl job and the SFT warm
start that feeds it (one architecture from SFT to the job's final model).

Why: a verl trajectory is one token sequence that grows turn by turn (the first prompt, then each response and
observation appended), while the local engine and the SFT warm start give the model a fresh prompt each turn, cut
to its last ``training.max_prompt_length`` tokens. The toy model learned to act on 128 such tokens; in the verl
sequence it also attended to ~1000 earlier ones and its later turns stopped parsing (measured on the SFT model's
greedy turns 2+ of 8 rule episodes: 24 of 24 parsed on the local engine's prompt, 3 of 24 in the verl sequence
with full attention, 24 of 24 with a 128-token window). Sliding-window attention is the same weights attending to
the last N tokens in the actor, the reference model and the rollout alike, so rollout and training stay one policy.

How: Mistral is Llama with an optional ``sliding_window`` (same module names, same weights), so a Llama checkpoint
is written as a Mistral config beside links to its weight files; a Mistral checkpoint only gets the window set.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

#: Files linked, not copied: the weights (a real checkpoint's are large and are read only).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def windowed_model_dir(model_dir: str | Path, window: int, dest: str | Path) -> Path:
    """Write ``dest``: ``model_dir`` with ``sliding_window = window`` (a Llama config becomes Mistral); its weight
    files are symlinked. Raises ValueError naming the field for a model type this cannot express."""
    src = Path(model_dir)
    config_path = src / "config.json"
    if not config_path.is_file():
        raise ValueError(f"training.attention_window: {src} is not a local HF model dir (no config.json)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = config.get("model_type")
    if model_type == "llama":
        if config.get("attention_bias") or config.get("mlp_bias"):
            raise ValueError(f"training.attention_window: {src} is a Llama model with biases, which the Mistral "
                             "architecture does not have")
        config.update(model_type="mistral", architectures=["MistralForCausalLM"])
    elif model_type != "mistral":
        raise ValueError(f"training.attention_window: {src} is a {model_type!r} model; only llama and mistral "
                         "checkpoints (the toy model) can be given a sliding window here")
    config["sliding_window"] = int(window)
    out = Path(dest)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path in src.iterdir():
        if path.name == "config.json" or path.is_dir():
            continue
        if path.name.endswith(_WEIGHT_SUFFIXES):
            os.symlink(path.resolve(), out / path.name)
        else:
            shutil.copy2(path, out / path.name)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out
