"""rLLM's chat parser for the toy model's role-tagged chat format (``<|role|>\\ncontent<|end|>\\n``).

rLLM 0.2.x picks a parser by the tokenizer's *name* (``ChatTemplateParser.get_parser``: deepseek / qwen / llama,
else its generic parser, which has no ``assistant_token`` and no ``parse_completion``, so its engine fails on the
toy with ``'ChatTemplateParser' object has no attribute 'assistant_token'``). :func:`install_toy_chat_parser` makes
``get_parser`` answer a tokenizer that carries the toy's chat template with :class:`ToyChatTemplateParser`, and
passes every other tokenizer to rLLM's own choice. It runs when ``graph_planner.integrations.rllm`` is imported
with rLLM importable, so a Ray worker that unpickles the adapter classes installs it too.
"""

from __future__ import annotations

from typing import Any

from graph_planner.models.toy import CHAT_TEMPLATE, END

#: Marks rLLM's get_parser once wrapped (installing twice must not wrap twice).
_INSTALLED = "_graph_planner_toy_parser"
_PARSER_CLASS: type | None = None


def is_toy_tokenizer(tokenizer: Any) -> bool:
    return getattr(tokenizer, "chat_template", None) == CHAT_TEMPLATE


def toy_chat_parser_class() -> type:
    """:class:`ToyChatTemplateParser`, a subclass of rLLM's ``ChatTemplateParser`` (made on first use: rLLM is an
    optional install, imported only here)."""
    global _PARSER_CLASS
    if _PARSER_CLASS is not None:
        return _PARSER_CLASS
    from rllm.parser import ChatTemplateParser

    class ToyChatTemplateParser(ChatTemplateParser):
        """The toy's template is one block per message, so parsing messages one by one and together agree (what
        rLLM's token/mask conversion relies on). The assistant's turn opens with ``<|assistant|>\\n`` (the
        generation prompt) and ends with ``<|end|>``, the EOS token."""

        def __init__(self, tokenizer: Any, processor: Any = None, **_: Any) -> None:
            self.tokenizer = tokenizer
            self.processor = None
            self.assistant_token = "<|assistant|>\n"
            self.generation_prompt = self.assistant_token
            self.eos_token = END
            self.eot_token = f"{END}\n"

        def parse(self, messages: list[dict[str, Any]], add_generation_prompt: bool = False,
                  is_first_msg: bool = False, tools: Any = None, accumulate_reasoning: bool = False,
                  **_: Any) -> str:
            # tools: the planner's actions are described in its system prompt (text protocol), as for the toy
            # everywhere else; the template renders content and tool_calls of each message
            return self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                      add_generation_prompt=add_generation_prompt)

        def parse_completion(self, completion_ids: list[int]) -> dict[str, Any]:
            text = self.tokenizer.decode(completion_ids, skip_special_tokens=False)
            content = text.split(END, 1)[0]
            return {"content": content, "reasoning": "", "tool_calls": []}

    _PARSER_CLASS = ToyChatTemplateParser
    return _PARSER_CLASS


def install_toy_chat_parser() -> bool:
    """Make rLLM's ``ChatTemplateParser.get_parser`` return the toy parser for the toy's tokenizer; False when
    rLLM is not importable. Idempotent."""
    try:
        from rllm.parser import ChatTemplateParser
    except ImportError:
        return False
    if getattr(ChatTemplateParser.get_parser, _INSTALLED, False):
        return True
    original = ChatTemplateParser.get_parser.__func__  # type: ignore[attr-defined]
    parser_class = toy_chat_parser_class()

    def get_parser(cls: type, tokenizer: Any, processor: Any = None, disable_thinking: bool = False) -> Any:
        if is_toy_tokenizer(tokenizer):
            return parser_class(tokenizer)
        return original(cls, tokenizer, processor=processor, disable_thinking=disable_thinking)

    setattr(get_parser, _INSTALLED, True)
    ChatTemplateParser.get_parser = classmethod(get_parser)  # type: ignore[method-assign,assignment]
    return True
