"""actionspace: a runtime between an LLM and the tools it calls."""
