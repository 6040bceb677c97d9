"""The toy planner model: a tiny random-weight Llama and a byte-level BPE tokenizer trained here, on CPU.

It is a real Hugging Face checkpoint (``save_pretrained``; loaded back with ``AutoModelForCausalLM`` /
``AutoTokenizer.from_pretrained``), so every code path that serves a real model also serves this one: the
embedded default, CPU tests and the local GRPO backend. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from graph_planner.models.loading import MODEL_LOCK

log = logging.getLogger(__name__)

#: Bump when the recipe changes, so cached checkpoints built by an older recipe are not reused.
#: 2: the tokenizer corpus also holds the planner's system prompt and the bundled sample repositories' code.
RECIPE_VERSION = 2
#: The bundled sample repositories (datasets/sample/repos): the code the embedded default's tasks are about.
SAMPLE_REPOS = Path(__file__).resolve().parents[2] / "datasets" / "sample" / "repos"
SPEC_FILE = "toy_spec.json"

PAD, BOS, END = "<|pad|>", "<|bos|>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
SPECIAL_TOKENS = (PAD, BOS, END, *ROLE_TOKENS)

#: Role-tagged chat template: ``<|role|>\ncontent<|end|>\n`` per message; ``<|end|>`` is the EOS token, so
#: generation stops at the end of the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message.get('tool_calls') %}{{ message['tool_calls'] | tojson }}{% endif %}"
    "<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_ACTIONS = ("explore_find", "explore_expand", "read", "memory_commit", "memory_delete", "note", "run_tests",
            "repair", "submit")
_ARGUMENT_KEYS = ("query", "node_id", "hop", "node_ids", "note", "text", "plan", "target_node_ids")
_TEXT = (
    "The test fails because the function returns the wrong value for an empty list.",
    "Find the function that parses the config file and read its body.",
    "Commit the relevant nodes to memory, then ask for a repair of the failing function.",
    "Run the tests to see which assertion fails and why.",
    "The issue: calling add with a negative number raises an error instead of returning the sum.",
    "def add(a, b):\n    return a + b\n",
    "class Parser:\n    def parse(self, text: str) -> dict:\n        return json.loads(text)\n",
    "import os\nfrom pathlib import Path\n\nif __name__ == '__main__':\n    main()\n",
    "FAILED tests/test_core.py::test_add - AssertionError: assert 3 == 4",
    "PASSED tests/test_core.py::test_sub",
    "diff --git a/src/core.py b/src/core.py\n--- a/src/core.py\n+++ b/src/core.py\n@@ -1,2 +1,2 @@\n",
)


def default_corpus() -> list[str]:
    """Training text for the tokenizer: the action JSON vocabulary, Python keywords and code, issue-style text,
    the planner's system prompt and the bundled sample repositories' sources.

    The last two make the toy tokenizer fit the text it actually reads (about 3 characters per token instead of
    1.8 on the embedded default's prompts, node ids a third shorter), so the toy model sees shorter sequences,
    which is both faster on CPU and easier to imitate. A checkout without the samples still gets a tokenizer.
    """
    from graph_planner.episode.wire import system_prompt

    lines: list[str] = [system_prompt()] * 4
    lines.extend(path.read_text(encoding="utf-8", errors="replace")
                 for path in sorted(SAMPLE_REPOS.rglob("*.py")) if path.is_file())
    for action in _ACTIONS:
        for key in _ARGUMENT_KEYS:
            lines.append(json.dumps({"name": action, "arguments": {key: f"{action} {key}"}}))
        lines.append(f"```json\n{json.dumps({'name': action, 'arguments': {}})}\n```")
    lines.extend(" ".join(keyword.kwlist[i:i + 6]) for i in range(0, len(keyword.kwlist), 6))
    lines.extend(f"def {name}(self, value):\n    return {name}(value)\n" for name in dir(__builtins__)[:80])
    lines.extend(_TEXT)
    lines.extend(ROLE_TOKENS)
    return lines * 4


def toy_spec(vocab_size: int, hidden: int, layers: int, seed: int, corpus: Sequence[str]) -> dict[str, object]:
    """The parameters that define a toy checkpoint; their hash names the cache entry."""
    corpus_sha = hashlib.sha256("\n".join(corpus).encode("utf-8")).hexdigest()
    return {"recipe": RECIPE_VERSION, "vocab_size": vocab_size, "hidden": hidden, "layers": layers, "seed": seed,
            "corpus_sha256": corpus_sha}


def _spec_key(spec: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _train_tokenizer(corpus: Iterable[str], vocab_size: int):  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from graph_planner.imports import import_lock

    with import_lock():
        from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=END, pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS), chat_template=CHAT_TEMPLATE, model_max_length=4096,
    )


def _build_problem(model, initializer_range: float) -> str | None:  # model: LlamaForCausalLM
    """Why ``model`` is not what a clean seeded build gives, or None.

    Concurrent ``from_pretrained`` calls can leave transformers' weight init and tying switched off
    (graph_planner/models/loading.py); a toy built then has an untied, separately random LM head or uninitialised
    weights. Such a toy, cached under the same key as a clean one, made the same seeded run train differently
    (found in CI). A clean build ties the head and draws every linear weight with std ``initializer_range``.
    """
    if model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        return "the LM head is not tied to the input embeddings"
    for name, param in model.named_parameters():
        data = param.detach()
        if not bool(data.isfinite().all()):
            return f"{name} holds non-finite values"
        if data.dim() == 2:
            std = float(data.std())
            if not 0.5 * initializer_range < std < 2 * initializer_range:
                return f"{name} has std {std:.4g}, not ~{initializer_range} (not initialised)"
    return None


def _build_model(tokenizer, hidden: int, layers: int, seed: int):  # -> LlamaForCausalLM
    from graph_planner.imports import import_lock

    with import_lock():
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

    heads = max(1, hidden // 16)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 4, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=4096,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with MODEL_LOCK, torch.random.fork_rng(devices=[]):  # seeded init without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    problem = _build_problem(model, config.initializer_range)
    if problem is not None:
        raise RuntimeError(f"the toy model was built wrong ({problem}): transformers' weight init or tying is "
                           "switched off in this process, e.g. by a from_pretrained that ran concurrently outside "
                           "graph_planner.models.loading.load_causal_lm")
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def create_toy_checkpoint(
    out_dir: str | Path,
    vocab_size: int = 1024,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    corpus: Sequence[str] | None = None,
) -> Path:
    """Train the tokenizer, build the seeded random model and ``save_pretrained`` both into ``out_dir``.

    The directory appears atomically (built beside it, then renamed), so a crash never leaves a half checkpoint.
    Raises FileExistsError when ``out_dir`` already holds files.
    """
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"toy checkpoint dir {out} is not empty; pick another dir or delete it")
    corpus = list(corpus) if corpus is not None else default_corpus()
    spec = toy_spec(vocab_size, hidden, layers, seed, corpus)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tokenizer = _train_tokenizer(corpus, vocab_size)
        model = _build_model(tokenizer, hidden, layers, seed)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / SPEC_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True), encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.rename(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("built toy checkpoint %s (vocab %d, hidden %d, layers %d, seed %d)", out, len(tokenizer), hidden,
             layers, seed)
    return out


def ensure_toy_checkpoint(
    cache_dir: str | Path,
    vocab_size: int = 1024,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    corpus: Sequence[str] | None = None,
) -> Path:
    """Return the cached toy checkpoint for these parameters, building it on first use.

    The entry is ``<cache_dir>/toy-<hash of the parameters and corpus>``; concurrent builders race safely (the
    loser's copy is discarded).
    """
    corpus = list(corpus) if corpus is not None else default_corpus()
    spec = toy_spec(vocab_size, hidden, layers, seed, corpus)
    target = Path(cache_dir) / f"toy-{_spec_key(spec)}"
    if (target / SPEC_FILE).is_file() and (target / "config.json").is_file():
        return target
    staging = Path(cache_dir) / f".build-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    built = create_toy_checkpoint(staging / "ckpt", vocab_size, hidden, layers, seed, corpus)
    try:
        os.rename(built, target)
    except OSError:
        if not (target / SPEC_FILE).is_file():  # not a lost race: a real error
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_model_path(name_or_path: str, cache_dir: str | Path) -> str:
    """``'toy'`` -> the cached toy checkpoint dir; anything else (a path or a hub id) unchanged."""
    if name_or_path == "toy":
        return str(ensure_toy_checkpoint(cache_dir))
    return name_or_path
