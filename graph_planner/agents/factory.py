"""Build the policy a run config asks for: `experiment.agent` (planner | cgm) and `backends.planner_backend`
(rule | toy | hf | openai), with the rule fallback when `env.use_rule_fallback` is on."""

from __future__ import annotations

from graph_planner.agents import Policy
from graph_planner.agents.model_policy import ModelPolicy
from graph_planner.agents.rule_policy import RulePolicy, SynthesizerOnlyPolicy
from graph_planner.config.schema import RunConfig
from graph_planner.models.chat import ChatModel, HFChatModel, OpenAIChatClient


def make_chat_model(config: RunConfig) -> ChatModel:
    """The planner's chat model: an OpenAI-compatible endpoint, or a local HF checkpoint ('toy' = built-in)."""
    backend = config.backends.planner_backend
    if backend == "openai":
        if not config.backends.planner_endpoint:
            raise ValueError("backends.planner_backend=openai needs backends.planner_endpoint (base URL of an "
                             "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)")
        return OpenAIChatClient(config.backends.planner_endpoint, config.paths.planner_model,
                                config.backends.planner_api_key_env, sampling=config.planner_sampling)
    if backend in ("toy", "hf"):
        from graph_planner.models.toy import resolve_model_path

        path = resolve_model_path(config.paths.planner_model, config.paths.cache_dir)
        return HFChatModel(path, sampling=config.planner_sampling, tokenizer_path=config.paths.planner_tokenizer,
                           dtype=config.backends.dtype, device_map=config.backends.device_map_planner,
                           seed=config.experiment.seed, max_gpu_memory=config.backends.max_gpu_memory,
                           max_prompt_tokens=config.training.max_prompt_length)  # the budget it was trained with
    raise ValueError(f"backends.planner_backend={backend!r} has no chat model (use toy, hf or openai)")


def make_policy(config: RunConfig, chat: ChatModel | None = None, planner_backend: str | None = None) -> Policy:
    """`--agent cgm` -> the synthesiser alone; planner_backend rule -> rules; else a model policy over ``chat``
    (default: :func:`make_chat_model`). ``planner_backend`` replaces ``backends.planner_backend`` (`gp smoke`
    always runs the rule agent)."""
    if config.experiment.agent == "cgm":
        return SynthesizerOnlyPolicy()
    if (planner_backend or config.backends.planner_backend) == "rule":
        return RulePolicy()
    fallback = RulePolicy() if config.env.use_rule_fallback else None
    return ModelPolicy(chat or make_chat_model(config), config.planner_sampling, config.env.history_turns, fallback)
