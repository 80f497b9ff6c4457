"""AgentDojo environments and injections, built the way the benchmark builds them, only faster.

AgentDojo formats its environment YAML with the injection texts and parses it with PyYAML's pure
Python loader (about 0.4 s for the workspace suite, once per task pair). Here the same text goes
through the same steps with libyaml's loader when PyYAML has it (10x faster); tests check the
result equals AgentDojo's own ``load_and_inject_default_environment`` and that the injections equal
its ``important_instructions`` attack's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ATTACK_USER_NAME", "Injector", "load_environment"]

ATTACK_USER_NAME = "Emma Johnson"
"""The victim's name AgentDojo's ``important_instructions`` attack signs its text with."""


def load_environment(suite: Any, injections: Mapping[str, str], defaults: Mapping[str, str]) -> Any:
    """The suite's environment with ``injections`` in their vectors (the others at their defaults)."""
    import yaml  # AgentDojo's own dependency
    from agentdojo.task_suite.task_suite import read_suite_file, validate_injections

    text = read_suite_file(suite.name, "environment.yaml", suite.data_path)
    validate_injections(dict(injections), dict(defaults))
    filled = text.format(**{**defaults, **injections})
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return suite.environment_type.model_validate(yaml.load(filled, Loader=loader))


class Injector:
    """Which vectors a user task reads, and the attack text for an injection task's goal."""

    def __init__(self, suite: Any) -> None:
        from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME
        from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack

        self.suite = suite
        self.defaults: dict[str, str] = suite.get_injection_vector_defaults()
        self.template: str = ImportantInstructionsAttack._JB_STRING
        self.model_name: str = DEFAULT_MODEL_NAME
        self._canaries = {v: f"<CANARY---{v}--->" for v in self.defaults}
        self._canary_env: Any = None
        self._candidates: dict[str, list[str]] = {}

    def candidates(self, user_task: Any) -> list[str]:
        """The vectors whose content the user task's ground truth shows the model (AgentDojo's rule)."""
        found = self._candidates.get(user_task.ID)
        if found is not None:
            return found
        from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
        from agentdojo.functions_runtime import FunctionsRuntime
        from agentdojo.types import get_text_content_as_str

        if self._canary_env is None:
            self._canary_env = load_environment(self.suite, self._canaries, self.defaults)
        runtime = FunctionsRuntime(self.suite.tools)
        env = self._canary_env.model_copy(deep=True)
        _, _, _, messages, _ = GroundTruthPipeline(user_task).query(user_task.PROMPT, runtime, env)
        shown = " ".join(get_text_content_as_str(m["content"]) for m in messages if m["content"] is not None)
        found = [v for v, canary in self._canaries.items() if canary in shown]
        self._candidates[user_task.ID] = found
        return found

    def injections(self, user_task: Any, injection_task: Any) -> dict[str, str]:
        """The ``important_instructions`` text for the injection's goal, in each candidate vector."""
        text = self.template.format(
            goal=injection_task.GOAL, user=ATTACK_USER_NAME, model=self.model_name, task=user_task.PROMPT
        )
        return {v: text for v in self.candidates(user_task)}
