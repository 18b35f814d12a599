#!/usr/bin/env python3
"""Renders the tool-calling conversations of tests/tokenizer/tool_chat_template_test.cc with a
checkpoint's chat_template.jinja, as Hugging Face transformers renders it (Jinja2 with
trim_blocks and lstrip_blocks; tojson is json.dumps with ensure_ascii=False, members in the order
given), writing <prefix>_<conversation>.txt beside this script.

  python3 render.py qwen3 ../qwen3/chat_template.jinja
  python3 render.py qwen3_5 /path/to/Qwen3.5/chat_template.jinja
  python3 render.py llama3_1 /path/to/Llama-3.1-8B-Instruct/chat_template.jinja

A conversation the template refuses (Llama 3.1's takes one call per message) is left out.

Needs python3-jinja2 (Debian). The tests read the files; they do not run this."""
import json
import pathlib
import sys

import jinja2

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Température à venir",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}},
]


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    "system_and_query": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris?"}],
    "two_calls_and_their_results": [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("get_weather", {"city": "Paris", "days": 2}), call("now", {})]},
        {"role": "tool", "content": "18C"},
        {"role": "tool", "content": "noon"}],
    "one_call_and_its_result": [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("get_weather", {"city": "Paris"})]},
        {"role": "tool", "content": "{\"temp\": \"18 \u00b0C\"}"}],
    "a_call_after_text_then_a_new_query": [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [call("get_weather", {"city": "Paris", "flag": True, "x": None,
                                             "l": [1, 2.5]})]},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks"}],
}


def main():
    prefix, template_path = sys.argv[1], sys.argv[2]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    template = env.from_string(pathlib.Path(template_path).read_text())
    here = pathlib.Path(__file__).parent
    for name, messages in CONVERSATIONS.items():
        try:
            text = template.render(messages=messages, tools=TOOLS, add_generation_prompt=True,
                                   enable_thinking=False, bos_token="<|begin_of_text|>")
        except jinja2.exceptions.TemplateError:
            continue
        (here / f"{prefix}_{name}.txt").write_text(text)


if __name__ == "__main__":
    main()
