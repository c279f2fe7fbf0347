"""Writes tests/goldens/templates/*.json: chat-template renderings made by Hugging Face
transformers, which tests/py/test_chat_template.py compares byte for byte with `tern template`.

  python3 tests/gen/gen_template_goldens.py        (needs transformers and jinja2, no torch)

models.json: the Qwen3, Gemma 3, Llama 3 and demo-model templates rendered with
AutoTokenizer.apply_chat_template(tokenize=False) over a set of conversations, with and without
add_generation_prompt and enable_thinking. A case where transformers raises records the error.

features.json: small templates that exercise one interpreter feature each (filters, tests,
loops, macros, whitespace control, ...), rendered with transformers' own Jinja environment.
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("TERN_SHARED", ROOT.parent / "shared"))
OUT = ROOT / "tests" / "goldens" / "templates"

MODELS = {
    "qwen3": "fixtures/tokenizers/qwen3",
    "gemma3": "fixtures/tokenizers/gemma3",
    "llama3": "fixtures/tokenizers/llama3",
    "demo": "models/tern-demo-code-17m",
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city — «quoted» & <escaped>?",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": None},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "precision": {"type": "number", "default": 0.5},
                "verbose": {"type": "boolean", "default": False},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.\nReturns a list of results.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn_system": [
        {"role": "system", "content": "Be concise."},
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ],
    "multi_turn_no_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
    ],
    "whitespace_content": [
        {"role": "system", "content": "  padded system  \n"},
        {"role": "user", "content": "\n\n  leading and trailing spaces \t \n"},
        {"role": "assistant", "content": "  answer\twith tabs  "},
        {"role": "user", "content": "line1\r\nline2\rline3\n\nline5"},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 日本語も大丈夫です。"},
        {"role": "user", "content": "Emoji: 👩🏽‍💻 🇨🇭 ❤️ — Arabic: مرحبا — Hindi: नमस्ते — combining: é e\u0301"},
        {"role": "assistant", "content": "Ελληνικά, русский, 한국어, עברית 🙂"},
        {"role": "user", "content": "Zero width: a\u200bb, NBSP:\u00a0x, ideographic space:\u3000y, nul-free \u0007 bell"},
    ],
    "special_chars": [
        {"role": "user", "content": "Quotes \"double\" and 'single', backslash \\ and {{ braces }} {% not a tag %} {# nor a comment #}"},
    ],
    "tool_call": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Zürich?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2, "unit": None}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear."},
    ],
    "tool_call_string_args": [
        {"role": "user", "content": "Search for cats and dogs."},
        {
            "role": "assistant",
            "content": "Let me search.",
            "tool_calls": [
                {"type": "function", "function": {"name": "search", "arguments": "{\"query\": \"cats\"}"}},
                {"type": "function", "function": {"name": "search", "arguments": {"query": "dogs \"quoted\"\n\ttab"}}},
            ],
        },
        {"role": "tool", "content": "cats: 10 results"},
        {"role": "tool", "content": "dogs: 12 results"},
    ],
    "tool_call_no_content": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "sunny"},
    ],
    "reasoning_content": [
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."},
        {"role": "user", "content": "And 4*6?"},
        {"role": "assistant", "content": "24", "reasoning_content": "\n4 times 6 is 24.\n"},
    ],
    "think_in_content": [
        {"role": "user", "content": "Think first."},
        {"role": "assistant", "content": "<think>\nHmm, let me think.\n</think>\n\nDone thinking."},
        {"role": "user", "content": "Again."},
    ],
    "tool_response_user": [
        {"role": "user", "content": "<tool_response>\nold\n</tool_response>"},
        {"role": "user", "content": "Real question?"},
        {"role": "assistant", "content": "<think>x</think>Answer."},
    ],
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": " Part two."}]},
    ],
    "system_only": [{"role": "system", "content": "Only a system message."}],
    "empty": [],
    "not_alternating": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
}

TOOLS = {
    "tool_call": [WEATHER_TOOL],
    "tool_call_string_args": [SEARCH_TOOL, WEATHER_TOOL],
    "tool_call_no_content": [WEATHER_TOOL],
    "system_user": None,
}

VARIANTS = [
    ("gen", True, None),
    ("nogen", False, None),
    ("gen_nothink", True, {"enable_thinking": False}),
    ("gen_think", True, {"enable_thinking": True}),
]


def render_model(tok, messages, tools, agp, kwargs):
    try:
        out = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=False, **(kwargs or {}))
        return {"expected": out}
    except Exception as e:  # the template raised: tern must fail too
        return {"error": f"{type(e).__name__}: {e}"}


def model_goldens():
    cases = []
    for model, rel in MODELS.items():
        tok = AutoTokenizer.from_pretrained(str(SHARED / rel))
        for conv_name, messages in CONVERSATIONS.items():
            for tools_on in (False, True):
                tools = TOOLS.get(conv_name) if tools_on else None
                if tools_on and tools is None:
                    if conv_name != "user_only":
                        continue
                    tools = [WEATHER_TOOL, SEARCH_TOOL]
                for vname, agp, kwargs in VARIANTS:
                    case = {
                        "name": f"{model}/{conv_name}{'/tools' if tools else ''}/{vname}",
                        "model": rel,
                        "messages": messages,
                        "tools": tools,
                        "add_generation_prompt": agp,
                        "kwargs": kwargs,
                    }
                    case.update(render_model(tok, json.loads(json.dumps(messages)), tools, agp, kwargs))
                    cases.append(case)
    return cases


# Feature templates: name → (template, messages, extra variables)
M2 = [{"role": "user", "content": "Hello World"}, {"role": "assistant", "content": "  Hi!  "}]
FEATURES = {
    "arith": "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-7 }} {{ 3.0 }} {{ -0.0 }} {{ 10 / 4 }}",
    "compare": "{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'a' < 'b' }} {{ [1,2] == [1,2] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ none == none }} {{ 'x' != 'y' }} {{ 2 >= 2 }}",
    "logic": "{{ 0 or 'b' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not 0 }} {{ not 'x' }} {{ 1 if 0 else 2 }} {{ 'yes' if 1 }}|",
    "in_ops": "{{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }} {{ 'x' in undefined_var }}",
    "strings": "{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ \"it's\" }} {{ 'esc\\ttab\\nnl\\u00e9\\x41' }} {{ 'a' 'b' }}",
    "subscripts": "{{ 'hello'[1] }} {{ 'hello'[-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'hello'[::2] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3,4][::-1] }} {{ 'héllo wörld'[1:8] }} {{ 'héllo'[::-1] }} {{ [1,2,3][5:] }} {{ messages[0]['role'] }} {{ messages[0].content }} {{ messages[-1].role }}",
    "literals": "{{ [1, 'a', none, true] }} {{ {'a': 1, 'b': [1, 2]} }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ 'q\"uote' }} {{ \"s'q\" }} {{ [1.5, -2] }} {{ {'k': {'n': none}} }}",
    "tojson": "{{ messages | tojson }}\n{{ messages | tojson(indent=2) }}\n{{ {'a': [1, 2.5, true, none, 'é\"\\\\\\n'], 'b': {}} | tojson }}\n{{ [] | tojson(indent=4) }}\n{{ 'x' | tojson }} {{ 1.0 | tojson }} {{ {'z': 1, 'a': 2} | tojson(sort_keys=true) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ [1,[2,{'x':3}]] | tojson(indent=1) }} {{ {'a':1} | tojson(separators=(',', ':')) }} {{ '\\u0001\\u001f\\u007f' | tojson }} {{ '😀' | tojson(true) }}",
    "filters_str": "{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'Hello' | upper }} {{ 'Hello' | lower }} {{ 'hello world' | capitalize }} {{ 'hELLO wORLD-foo (bar' | title }} {{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | reverse }} {{ 'abc' | length }} {{ 'héllo' | length }} {{ 42 | string }} {{ 'x' | safe }} {{ 'a b  c' | wordcount }} {{ '<&>' | e }} {{ 'abc' | center(9) }}|",
    "filters_num": "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 3 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(0, 'floor') }} {{ [1, 2, 3] | sum }} {{ [3, 1, 2] | max }} {{ [3, 1, 2] | min }} {{ ' 12 ' | int }} {{ '0x1A' | int(0, 16) }}",
    "filters_seq": "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 2, 1, 3] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ [1, 2, 3] | join('-') }} {{ [1, 2, 3] | join }} {{ 'abc' | list }} {{ {'b': 1, 'a': 2} | dictsort }} {{ {'b': 1, 'a': 2} | items | list }} {{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 'x') | list }} {{ [1,2,3] | length }} {{ [1,2,3] | count }}",
    "filters_attr": "{{ messages | map(attribute='role') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='content') | first }} {{ messages | map(attribute='missing', default='d') | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ ['a', 'B'] | map('upper') | list }} {{ messages | selectattr('content') | list | length }} {{ [{'a': {'b': 5}}] | map(attribute='a.b') | list }} {{ messages | sort(attribute='role', reverse=true) | map(attribute='role') | list }}",
    "default": "{{ missing | default('dflt') }} {{ missing | d('d2') }} {{ '' | default('empty') }} {{ '' | default('empty', true) }} {{ none | default('n') }} {{ missing is defined }} {{ missing is undefined }} {{ messages[0].nope is defined }} [{{ missing }}] [{{ missing | length }}] [{{ missing | trim }}] {{ missing | list }}",
    "tests": "{{ none is none }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 'x' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'x' is iterable }} {{ 5 is iterable }} {{ [] is sequence }} {{ true is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 2 is in [1, 2] }} {{ 'a' is lower }} {{ 'A' is upper }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 3 is ge 3 }} {{ 3 is le 2 }} {{ none is sameas none }} {{ messages is not string }} {{ 1 is not none }} {{ range is callable }}",
    "str_methods": "{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x  '.strip() }}|{{ '--x--'.lstrip('-') }}|{{ '--x--'.rstrip('-') }}|{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='N') }} {{ '-'.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab\\ncd\\r\\nef'.splitlines() }} {{ 'x'.center(5, '*') }} {{ '7'.zfill(3) }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'élan'.upper() }} {{ 'ÉLAN'.lower() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ ''.split(',') }} {{ ''.split() }}",
    "dict_methods": "{% set d = {'b': 1, 'a': 2} %}{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 9) }} {{ d['b'] }} {{ d.b }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %} {{ d | length }} {{ [1, 2, 1].count(1) }} {{ [1, 2, 3].index(2) }}",
    "loops": "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem is defined }}/{{ loop.nextitem is defined }}/{{ loop.cycle('odd', 'even') }};{% endfor %}\n{% for x in [] %}no{% else %}empty{% endfor %}\n{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ x }}:{{ loop.length }},{% endfor %}\n{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}\n{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}\n{% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %}\n{% for i in range(1, 10, 3) %}{{ i }}{% endfor %} {% for i in range(5, 0, -2) %}{{ i }}{% endfor %}\n{% for x in [1, 2, 3] %}{{ loop.previtem }}>{{ x }}<{{ loop.nextitem }} {% endfor %}",
    "scoping": "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}|{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set blk %}  block {{ x }}  {% endset %}[{{ blk }}]|{% set t | upper %}shout{% endset %}{{ t }}|{% with w = 3 %}{{ w }}{% endwith %}{{ w is defined }}",
    "macros": "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }} {{ greet() }}|{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}|{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}|{% macro args() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ args(1, 2, k=3) }}|{% macro withcaller(x) %}[{{ caller(x * 2) }}]{% endmacro %}{% call(v) withcaller(21) %}v={{ v }}{% endcall %}",
    "whitespace": "A\n  {% if true %}\n    B\n  {% endif %}\nC\n  {%- if true -%}\n  D\n  {%- endif -%}\n  E {{- ' F ' -}} G\n{# comment #}\nH\n    {#- trimmed comment -#}\n  I\n{%+ if true %}J{% endif %}\n{% if true +%}\nK{% endif %}\n  {{ 'L' }}\n{% raw %}{{ not evaluated }}{% endraw %}\nM\n",
    "whitespace_crlf": "line1\r\n{% if true %}\r\nline2\r\n{% endif %}\r\nline3\r\n",
    "filter_block": "{% filter upper %}shout {{ 'this' }}{% endfilter %} {% filter trim | replace('a', 'o') %}  banana  {% endfilter %}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
    "undefined_ops": "{{ missing ~ 'x' }} {{ messages[5] is defined }} {{ messages[0].missing is none }} {% if missing %}t{% else %}f{% endif %} {{ messages[0]['nope'] | default('dd') }} {% for x in missing %}{{ x }}{% endfor %}done",
    "string_format": "{{ '%s-%d' % ('a', 3) }} {{ '%s' % 'x' }} {{ '%r' % 'y' }} {{ '100%%' % () }} {{ 'v=%s' | format(5) }}",
    "repr_values": "{{ [1, 'it\\'s', \"q\\\"\", '\\n', none, true, 1.5, {'k': ('t',)}] }} {{ messages[0] }} {{ namespace(a=1).a }}",
    "bos_eos": "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ custom_var }}",
    "raise": "{% if messages | length > 1 %}{{ raise_exception('Too many messages: ' ~ messages | length) }}{% endif %}ok",
    "undefined_call": "{{ no_such_function() }}",
    "undefined_attr_error": "{{ missing.attr }}",
    "type_error": "{{ 'a' + 1 }}",
    "unsafe_append": "{% set l = [] %}{{ l.append(1) }}",
    "div_zero": "{{ 1 // 0 }}",
    "dict_literal_in_output": "{{ {'a': {'b': 1}} }} {{ {'x': [1, {'y': 2}]}['x'][1]['y'] }}",
    "loop_namespace_multi": "{%- set ns = namespace(found=false, idx=-1) -%}\n{%- for m in messages[::-1] -%}\n  {%- if not ns.found and m.role == 'user' -%}\n    {%- set ns.found = true -%}\n    {%- set ns.idx = messages | length - 1 - loop.index0 -%}\n  {%- endif -%}\n{%- endfor -%}\n{{ ns.idx }} {{ ns.found }}",
    "tool_like": "{%- for tool in tools %}\n{{- tool.function.name }}: {{ tool.function.parameters.properties | items | map('first') | join(', ') }}\n{% endfor %}\n{{- tools[0] | tojson(indent=4) }}",
    "strftime": "{{ strftime_now('%Y') | length }}",
    "percent_format": "{{ '%5.2f|%-4d|%x|%o|%e|%g|%+d|%05d|%c|%.3s|%r' % (3.14159, 7, 255, 8, 12345.678, 0.0001, 3, 42, 65, 'abcdef', 'q') }} {{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }} {{ '%s' % {'k': 1} }} {{ '%x' % -255 }} {{ 'wc: ' ~ ('one two_three, 4.5 é' | wordcount) }}",
    "scoping_macros": "{% macro f() %}[{{ y }}]{% endmacro %}{% set y = 5 %}{{ f() }}{% set y = 1 %}{% for m in messages %}{% set y = 2 %}{{ f() }}{% endfor %}|{% macro g() %}[{{ m }}]{% endmacro %}{% for m in messages %}{{ g() }}{% endfor %}|{% macro w() %}({{ caller() }}){% endmacro %}{% for m in messages %}{% call w() %}{{ m.role }}{{ loop.index }}{% endcall %}{% endfor %}|{% for m in messages %}{% set c = m.content %}{% if loop.first %}{% set first = c %}{% endif %}{{ first is defined }}{% endfor %}",
    "generators_markup": "{% if messages | selectattr('role', 'eq', 'nobody') %}gen-true{% endif %}|{{ none | map(attribute='x') | list }}|{{ ('<b>' | safe) + '<i>' }}|{{ '<i>' + ('<b>' | safe) }}|{{ ('<b>' | safe) ~ '<i>' }}|{{ {'a': 1}.items() }}|{% if false %}{{ x | not_a_filter }}{% endif %}ok",
    "generator_tojson_error": "{{ messages | map(attribute='role') | tojson }}",
    "ints_big": "{{ 2 ** 62 }} {{ 9223372036854775807 }} {{ -9223372036854775807 - 1 }}",
}


def render_feature(template, messages, tools, kwargs):
    try:
        out, _ = render_jinja_template(
            conversations=[messages], tools=tools, chat_template=template, add_generation_prompt=True,
            bos_token="<s>", eos_token="</s>", **(kwargs or {})
        )
        return {"expected": out[0]}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def feature_goldens():
    cases = []
    for name, template in FEATURES.items():
        tools = [WEATHER_TOOL, SEARCH_TOOL] if name in ("tool_like", "bos_eos") else None
        kwargs = {"custom_var": {"k": [1, 2]}} if name == "bos_eos" else None
        case = {"name": name, "template": template, "messages": M2, "tools": tools, "kwargs": kwargs,
                "bos_token": "<s>", "eos_token": "</s>"}
        case.update(render_feature(template, json.loads(json.dumps(M2)), tools, kwargs))
        if name == "strftime" and "expected" in case:
            case["expected"] = "4"
        cases.append(case)
    return cases


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    models = model_goldens()
    features = feature_goldens()
    (OUT / "models.json").write_text(json.dumps(models, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (OUT / "features.json").write_text(json.dumps(features, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_err = sum("error" in c for c in models + features)
    print(f"wrote {len(models)} model cases and {len(features)} feature cases ({n_err} expect an error)", file=sys.stderr)


if __name__ == "__main__":
    main()
