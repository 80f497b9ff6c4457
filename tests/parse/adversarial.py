"""Adversarial raw outputs, one set per family, built to any size: repeated markers, unclosed
openers and long runs of valid calls — the shapes that make a naive parser rescan its input."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

Q = '<|"|>'

# family → name → a unit repeated to the wanted size (with an optional fixed prefix / suffix).
UNITS: dict[str, dict[str, tuple[str, str, str]]] = {
    "any": {
        "think_pairs": ("", "<think></think>", ""),
        "eos_runs": ("", " </s>", ""),
        "unclosed_think": ("", "<think>", ""),
        "fences": ("", "```", ""),
        "json_objects": ("", "{}", ""),
        "open_brackets": ("", "[", ""),
    },
    "gemma4": {
        "calls": ("", f"<|tool_call>call:f{{a:{Q}x{Q},b:[1,2.5,true]}}<tool_call|>", ""),
        "openers": ("", "<|tool_call>", ""),
        "delimiters": ("<|tool_call>call:f{a:", Q, ""),
        "channels": ("", "<|channel>thought x", ""),
    },
    "deepseek": {
        "dsml_invokes": (
            "<｜DSML｜function_calls>\n",
            '<｜DSML｜invoke name="f"><｜DSML｜parameter name="a" string="true">1'
            "</｜DSML｜parameter></｜DSML｜invoke>",
            "</｜DSML｜function_calls>",
        ),
        "dsml_blocks": ("", "<｜DSML｜function_calls>", ""),
        "v31_calls": (
            "<｜tool▁calls▁begin｜>",
            '<｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a":1}<｜tool▁call▁end｜>',
            "<｜tool▁calls▁end｜>",
        ),
        "call_openers": ("", "<｜tool▁call▁begin｜>", ""),
    },
    "kimi_k2": {
        "calls": (
            "<|tool_calls_section_begin|>",
            '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a":1}<|tool_call_end|>',
            "<|tool_calls_section_end|>",
        ),
        "sections": ("", "<|tool_calls_section_begin|><|tool_calls_section_end|>x", ""),
        "call_openers": ("", "<|tool_call_begin|>", ""),
    },
    "harmony": {
        "calls": (
            "",
            '<|start|>assistant<|channel|>commentary to=functions.f json<|message|>{"a":1}<|call|>',
            "",
        ),
        "analysis_without_end": ("", "<|channel|>analysis<|message|>x", ""),
        "channels": ("", "<|channel|>", ""),
        "messages": ("", "<|message|>", ""),
    },
    "llama4_pythonic": {
        "calls": ("<|python_start|>[", "f(a=1, b='x'), ", "g()]<|python_end|>"),
        "starts": ("", "<|python_start|>", ""),
    },
    "qwen3_coder": {
        "calls": (
            "",
            "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n",
            "",
        ),
        "parameters": (
            "<tool_call>\n<function=f>\n",
            "<parameter=a>\n1\n</parameter>\n",
            "</function>\n</tool_call>",
        ),
        "function_openers": ("", "<function=", ""),
    },
    "mistral": {
        "calls": ("", '[TOOL_CALLS]f[ARGS]{"a":1}', ""),
        "named_calls": ("[TOOL_CALLS]", 'f{"a":1}', ""),
        "markers": ("", "[TOOL_CALLS]", ""),
    },
    "glm": {
        "calls": ("", "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", ""),
        "pairs": ("<tool_call>f\n", "<arg_key>a</arg_key><arg_value>1</arg_value>", "</tool_call>"),
        "key_openers": ("<tool_call>f", "<arg_key>", ""),
    },
    "hermes": {
        "calls": ("", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', ""),
        "openers": ("", "<tool_call>", ""),
    },
}


def build(prefix: str, unit: str, suffix: str, size: int) -> str:
    """``prefix + unit * k + suffix`` of about ``size`` characters."""
    count = max(1, (size - len(prefix) - len(suffix)) // len(unit))
    return prefix + unit * count + suffix


def cases() -> list[tuple[str, str, Callable[[int], str]]]:
    """(family, name, size → text) for every adversarial shape."""
    out: list[tuple[str, str, Callable[[int], str]]] = []
    for family, shapes in UNITS.items():
        for name, (prefix, unit, suffix) in shapes.items():
            out.append((family, name, partial(build, prefix, unit, suffix)))
    return out
