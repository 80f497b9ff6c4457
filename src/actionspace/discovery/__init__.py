"""What the model may see: candidate sets, ranking, progressive disclosure, provider renderings.

- :mod:`~actionspace.discovery.candidates`: the offered set from phase, capabilities, error state,
  ranking, then permissions and the rank cut, with the reason every other tool was left out;
- :mod:`~actionspace.discovery.ranking`: BM25 over the tools' words, optionally blended with
  embeddings (the ``embeddings`` extra ships all-MiniLM-L6-v2 for offline use);
- :mod:`~actionspace.discovery.disclosure`: short definitions first, full ones on demand;
- :mod:`~actionspace.discovery.render`: OpenAI (chat, Responses), Anthropic and MCP formats, and
  what the model reads of an observation (``render-v2``);
- :mod:`~actionspace.discovery.artifacts`: the ``read_artifact`` tool over a trimmed result's output.

``Runtime.offer`` and ``Runtime.describe`` use all of it; ``Runtime(discovery=DiscoveryConfig(...))``
sets the defaults.
"""

from __future__ import annotations

from actionspace.discovery.artifacts import READ_ARTIFACT, read_artifact_tool
from actionspace.discovery.candidates import (
    REASONS,
    Availability,
    CandidateIndex,
    LeftOutReason,
    Request,
    Selection,
    request_of,
)
from actionspace.discovery.config import Discovery, DiscoveryConfig, errors_in_trace
from actionspace.discovery.disclosure import (
    DESCRIBE_RECOVERY,
    DESCRIBE_TOOL,
    full_definition,
    short_definition,
)
from actionspace.discovery.ranking import Embedder, MiniLMEmbedder, Ranker, tool_text, words
from actionspace.discovery.render import (
    PROVIDERS,
    RENDERING,
    RESULT_BUDGET,
    Provider,
    anthropic_result,
    anthropic_tools,
    mcp_call_result,
    mcp_tools_list,
    openai_chat_result,
    openai_chat_tools,
    openai_responses_result,
    openai_responses_tools,
    render_result,
    render_results,
    render_tools,
    result_content,
)

__all__ = [
    "DESCRIBE_RECOVERY",
    "DESCRIBE_TOOL",
    "PROVIDERS",
    "READ_ARTIFACT",
    "REASONS",
    "RENDERING",
    "RESULT_BUDGET",
    "Availability",
    "CandidateIndex",
    "Discovery",
    "DiscoveryConfig",
    "Embedder",
    "LeftOutReason",
    "MiniLMEmbedder",
    "Provider",
    "Ranker",
    "Request",
    "Selection",
    "anthropic_result",
    "anthropic_tools",
    "errors_in_trace",
    "full_definition",
    "mcp_call_result",
    "mcp_tools_list",
    "openai_chat_result",
    "openai_chat_tools",
    "openai_responses_result",
    "openai_responses_tools",
    "read_artifact_tool",
    "render_result",
    "render_results",
    "render_tools",
    "request_of",
    "result_content",
    "short_definition",
    "tool_text",
    "words",
]
