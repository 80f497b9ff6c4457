"""Realistic outputs, one or more per format, written the way each model family emits them."""

from __future__ import annotations

import json
from typing import Any

OPENAI_ENTRY = (
    '{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\\"a\\":1,\\"b\\":2}"}}'
)

OPENAI_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_Dn2RJJSxzDm49vlVTehseJ0k",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Paris, France"}'},
                    },
                    {
                        "id": "call_Dn2RJJSxzDm49vlVTehseJ0l",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Bogotá, Colombia"}'},
                    },
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 49, "total_tokens": 131},
}

VLLM_REASONING_MESSAGE: dict[str, Any] = {
    "role": "assistant",
    "content": "I'll look that up.",
    "reasoning_content": "The user wants the weather in Tokyo; get_weather takes a city.",
    "tool_calls": [
        {
            "id": "chatcmpl-tool-8e1f6c2a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Tokyo", "unit": "celsius"}'},
        }
    ],
}

LEGACY_FUNCTION_CALL: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "function_call": {"name": "get_current_weather", "arguments": '{\n"location": "Boston, MA"\n}'},
}

RESPONSES_OBJECT: dict[str, Any] = {
    "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "object": "response",
    "status": "completed",
    "model": "o4-mini-2025-04-16",
    "output": [
        {
            "id": "rs_6820f383d7c08191846711c5df8233bc",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Checking Paris weather before answering."}],
        },
        {
            "type": "function_call",
            "id": "fc_12345xyz",
            "call_id": "call_12345xyz",
            "name": "get_weather",
            "arguments": '{"location":"Paris, France"}',
            "status": "completed",
        },
        {
            "type": "message",
            "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Fetching the forecast now.", "annotations": []}],
        },
    ],
}

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {
            "type": "thinking",
            "thinking": "The user asked about San Francisco.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
        },
        {"type": "text", "text": "I'll check the current weather in San Francisco for you."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"location": "San Francisco, CA", "unit": "celsius"},
        },
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 472, "output_tokens": 91},
}

MCP_REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "get_weather", "arguments": {"location": "New York"}},
}

HERMES = (
    "<think>\nThe user wants today's temperature and tomorrow's forecast. Two calls.\n</think>\n\n"
    "I'll fetch both.\n"
    "<tool_call>\n"
    '{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA"}}\n'
    "</tool_call>\n"
    "<tool_call>\n"
    '{"name": "get_temperature_date", '
    '"arguments": {"location": "San Francisco, CA, USA", "date": "2024-10-01"}}\n'
    "</tool_call><|im_end|>"
)

QWEN3_CODER = (
    "I'll run the failing test file first.\n\n"
    "<tool_call>\n<function=run_shell>\n<parameter=command>\npytest -q tests/test_api.py\n</parameter>\n"
    "<parameter=timeout>\n120\n</parameter>\n</function>\n</tool_call>\n"
    "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/api.py\n</parameter>\n"
    "<parameter=ranges>\n[[1, 40], [80, 120]]\n</parameter>\n</function>\n</tool_call>"
)

LLAMA3_PYTHON_TAG = (
    '<|python_tag|>{"name": "get_current_conditions", "parameters": {"location": "San Francisco, CA", '
    '"unit": "Fahrenheit"}}<|eom_id|>'
)

LLAMA3_SEMICOLONS = (
    '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
    '{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}'
)

PYTHONIC = (
    '[get_weather(city="San Francisco", days=3), math.factorial(n=5), f(x=[1, 2], y={"a": None}, ok=True)]'
)

LLAMA4 = (
    "<|python_start|>[get_weather(city='Seattle', metric='celsius'), "
    "get_weather(city='Tokyo', metric='celsius')]<|python_end|><|eot|>"
)

MISTRAL_V3 = (
    '[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"location": "Paris, France", '
    '"format": "celsius"}}]</s>'
)

MISTRAL_V13 = (
    "[THINK]The user wants weather and a search. Two tools.[/THINK]"
    '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich", "unit": "c"}'
    '[TOOL_CALLS]search[ARGS]{"query": "café \\"best\\"", "filters": {"tags": ["a"]}}</s>'
)

MISTRAL_V11 = '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Bern"}</s>'

DEEPSEEK_R1 = (
    "<think>\nI need the weather for Beijing, then Shanghai.\n</think>\n\n"
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_weather\n"
    '```json\n{"location": "Beijing"}\n```<｜tool▁call▁end｜>\n'
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_weather\n"
    '```json\n{"location": "Shanghai"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>'
)

DEEPSEEK_V31 = (
    "Let me check that.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Hangzhou", "date": "2025-08-21"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)

GLM45 = (
    "<think>The user asks for Beijing weather on a date; I have get_weather.</think>\n"
    "I'll look that up.\n"
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
    "<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
)

KIMI_K2 = (
    "I'll check the weather for both cities."
    "<|tool_calls_section_begin|>"
    "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Beijing"}<|tool_call_end|>'
    "<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>"
    '{"city": "Shanghai"}<|tool_call_end|>'
    "<|tool_calls_section_end|><|im_end|>"
)

HARMONY = (
    "<|channel|>analysis<|message|>User asks weather in SF. Use get_current_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json"
    '<|message|>{"location":"San Francisco, CA","unit":"celsius"}<|call|>'
)

HARMONY_FINAL = (
    "<|channel|>analysis<|message|>Weather returned 20C and sunny.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is sunny and 20°C in San Francisco.<|return|>"
)

GEMMA_TOOL_CODE = (
    'I can look up that product for you.\n\n```tool_code\nget_product_name_by_PID(PID="807ZPKBL9V")\n```\n'
)

FUNCTION_GEMMA = (
    "<start_function_call>call:get_current_temperature{location:<escape>Tokyo, Japan<escape>,"
    "unit:<escape>celsius<escape>,days:3,detailed:true,hours:[6,12,18],"
    "filter:{min:-2.5,label:<escape>a,b{c}<escape>}}<end_function_call>"
)

FENCED_JSON = (
    "I'll call the search tool.\n\n"
    '```json\n{"name": "web_search", "arguments": {"query": "python 3.13 release date"}}\n```\n\n'
    '```json\n{"name": "web_search", "arguments": {"query": "python 3.14 release date"}}\n```\n'
)

GEMMA4 = (
    "<|channel>thought\nTwo calls: weather, then a note.<channel|>Checking now."
    '<|tool_call>call:get_weather{city:<|"|>Paris, France<|"|>,days:3,detailed:true,hours:[6,12]}<tool_call|>'
    '<|tool_call>call:save_note{my note:{text:<|"|>a,b{c}<|"|>,score:1e+21,tags:null}}<tool_call|><turn|>'
)

DEEPSEEK_DSML = (
    "<think>Need the weather.</think>Let me check."
    "<｜DSML｜function_calls>\n"
    '<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Beijing</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="get_time"/>\n'
    "</｜DSML｜function_calls>"
)

PLAIN = "The capital of France is Paris."

TEXT_SAMPLES: dict[str, str] = {
    "openai_entry": OPENAI_ENTRY,
    "openai_completion": json.dumps(OPENAI_COMPLETION),
    "anthropic": json.dumps(ANTHROPIC_MESSAGE),
    "responses": json.dumps(RESPONSES_OBJECT),
    "mcp": json.dumps(MCP_REQUEST),
    "hermes": HERMES,
    "qwen3_coder": QWEN3_CODER,
    "llama3_python_tag": LLAMA3_PYTHON_TAG,
    "llama3_semicolons": LLAMA3_SEMICOLONS,
    "pythonic": PYTHONIC,
    "llama4": LLAMA4,
    "mistral_v3": MISTRAL_V3,
    "mistral_v13": MISTRAL_V13,
    "mistral_v11": MISTRAL_V11,
    "deepseek_r1": DEEPSEEK_R1,
    "deepseek_v31": DEEPSEEK_V31,
    "glm45": GLM45,
    "kimi_k2": KIMI_K2,
    "harmony": HARMONY,
    "harmony_final": HARMONY_FINAL,
    "gemma_tool_code": GEMMA_TOOL_CODE,
    "function_gemma": FUNCTION_GEMMA,
    "gemma4": GEMMA4,
    "deepseek_dsml": DEEPSEEK_DSML,
    "fenced_json": FENCED_JSON,
    "plain": PLAIN,
}
"""Every valid sample as text, for the truncation property."""
