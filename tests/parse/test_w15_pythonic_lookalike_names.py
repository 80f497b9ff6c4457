"""Python folds identifiers to NFKC as it reads them: ``get_ｗeather`` (a fullwidth ``w``) is
``get_weather`` to ``ast``, ``ｃity`` is ``city``, ``ﬁle`` is ``file``. The pythonic formats
(a bare call list, Llama 4 ``<|python_start|>``, Gemma ``tool_code``) read names with ``ast``, so
a name that only looks like an offered tool's ran that tool, where the same name in any JSON
format is ``unknown_tool``. A name is now matched as written: one Python would read as another is
a ``parse_error`` (reason ``invalid_name``) and nothing runs."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse
from tests.session.w47_world import sends, world

WRAPS = {
    "pythonic": "[{}]",
    "llama4": "<|python_start|>[{}]<|python_end|>",
    "gemma_tool_code": "```tool_code\n{}\n```",
}
LOOKALIKES = [
    'send_ｓms(to="+15550100", text="hi")',  # fullwidth s
    'send_sms(ｔo="+15550100", text="hi")',  # an argument's name
    'send_sms(to="+15550100", ｔext="hi", text="hi")',
    'ﬁle.send_sms(to="+15550100", text="hi")',  # a ligature in a dotted name
    'send_sms(to="+15550100", text="hi"), send_𝐬ms(to="+15550199", text="yo")',  # mathematical bold
]


@pytest.mark.parametrize("fmt", list(WRAPS))
@pytest.mark.parametrize("calls", LOOKALIKES)
def test_a_name_python_reads_as_another_is_refused(fmt: str, calls: str) -> None:
    text = WRAPS[fmt].format(calls)
    result = parse(text)
    assert result.calls == ()
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "invalid_name"
    assert result.error.recovery
    stream = StreamParser()
    for i in range(0, len(text), 5):
        stream.feed(text[i : i + 5])
    assert stream.finish() == result


@pytest.mark.parametrize("fmt", list(WRAPS))
def test_names_as_written_and_lookalikes_inside_strings_still_read(fmt: str) -> None:
    text = WRAPS[fmt].format('send_sms(to="+15550100", text="ｗｅｌｃｏｍｅ ﬁne，好")')
    result = parse(text)
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("send_sms", {"to": "+15550100", "text": "ｗｅｌｃｏｍｅ ﬁne，好"})
    ]


_FOLDING = st.sampled_from("ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕｖｗｘｙｚ𝐚𝐛𝐜𝐝𝐞ﬁﬂªº")


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True),
    arg=st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True),
    where=st.integers(min_value=0, max_value=40),
    folding=_FOLDING,
    in_name=st.booleans(),
)
def test_no_call_carries_a_name_other_than_the_one_written(
    name: str, arg: str, where: int, folding: str, in_name: bool
) -> None:
    target = name if in_name else arg
    at = where % (len(target) + 1)
    written = target[:at] + folding + target[at:]
    call = f"{written}({arg}=1)" if in_name else f"{name}({written}=1)"
    result = parse(f"[{call}]")
    for c in result.calls:  # none, or one whose names are exactly as written
        assert c.name in call and all(key in call for key in c.arguments)
    if unicodedata.normalize("NFKC", written) != written:
        assert result.calls == ()


def test_the_session_runs_nothing_for_a_lookalike_name(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_chat")
    s.user("text Bob")
    (obs,) = s.handle('[send_ｓms(to="+15550100", text="hi")]').observations
    assert obs.error is not None and obs.error.category == "parse_error" and obs.error.recovery
    assert sends(outbox) == []
    (ok,) = s.handle('[send_sms(to="+15550100", text="hi")]').observations
    assert ok.status == "ok" and sends(outbox) == [("+15550100", "hi")]
    rt.close()
