"""How a run of raw model outputs goes: each output parsed off the lanes, its calls sent in order,
each held one sent again once a person decided (:class:`CallRuns`, a part of
:class:`~actionspace.service.runner.BackgroundRuns`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.parse import ParseResult
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service._stopped import acall_typed
from actionspace.service.continuation import held_output, last_observations
from actionspace.service.held_nodes import held_request
from actionspace.service.outputs import calls_status, parse_output, read_output
from actionspace.service.runner_config import RunnerConfig
from actionspace.types import Observation, ToolCall

__all__ = ["CallRuns"]


class CallRuns:
    """The runs of raw outputs of :class:`~actionspace.service.runner.BackgroundRuns`, which gives
    the runtime, the configuration, the end of a run and the wait for a decision."""

    rt: Runtime
    config: RunnerConfig

    def _finish(self, run_id: str, **data: Any) -> None:
        raise NotImplementedError

    async def _decided(self, run_id: str, request_ids: list[str]) -> bool:
        raise NotImplementedError

    async def _calls(self, raws: list[Any], run_id: str, principal: Principal) -> str:
        observations: list[Observation] = []
        for index, raw in enumerate(raws, start=1):
            observations.extend(await self._output(raw, index, run_id, principal))
        status = calls_status([o.status for o in observations])
        errors = {o.call_id: o.error.category for o in observations if o.error is not None}
        self._finish(run_id, status=status, calls=len(observations), failed=errors)
        return status

    async def _output(self, raw: Any, index: int, run_id: str, principal: Principal) -> list[Observation]:
        """Parse output ``index`` and send its calls; its parse_error observations when none runs."""
        parsed = await read_output(self.rt, raw, run_id, timeout_s=self.config.parse_timeout_s)
        if not isinstance(parsed, ParseResult):
            return parsed
        return await self._send_calls(parsed.calls, index, 1, run_id, principal)

    async def _send_calls(
        self, calls: Sequence[ToolCall], index: int, first: int, run_id: str, principal: Principal
    ) -> list[Observation]:
        """Send the calls of output ``index`` from the ``first`` (from 1), each once decided."""
        out = []
        for sub, call in enumerate(calls, start=1):
            if sub < first:
                continue
            node = f"c{index}" if len(calls) == 1 else f"c{index}.{sub}"
            obs = await acall_typed(self.rt, call, run_id=run_id, node_id=node, principal=principal)
            out.append(await self._until_decided(obs, call, run_id, node, principal))
        return out

    async def _until_decided(
        self, obs: Observation, call: ToolCall | None, run_id: str, node: str, principal: Principal
    ) -> Observation:
        for _ in range(self.config.max_rounds):
            request_id = held_request(obs)
            if request_id is None or call is None or not await self._decided(run_id, [request_id]):
                return obs
            obs = await acall_typed(self.rt, call, run_id=run_id, node_id=node, principal=principal)
        return obs

    async def _continue_calls(self, request: ApprovalRequest, principal: Principal, raws: list[Any]) -> str:
        """Send the calls after the resumed one: the rest of its output, then the later outputs."""
        run_id = request.run_id
        place = held_output(request.node_id)
        index, sub = place if place is not None else (len(raws), None)
        if sub is not None and index <= len(raws):
            parsed = await parse_output(raws[index - 1], timeout_s=self.config.parse_timeout_s)
            if isinstance(parsed, ParseResult) and parsed.error is None and len(parsed.calls) >= sub:
                await self._send_calls(parsed.calls, index, sub + 1, run_id, principal)
        for later in range(index + 1, len(raws) + 1):
            await self._output(raws[later - 1], later, run_id, principal)
        events = await asyncio.to_thread(self.rt.trace.events, run_id)
        answered = last_observations(events, request.id)
        status = calls_status([str(d.get("status")) for d in answered.values()])
        errors = {k: d.get("category") for k, d in answered.items() if d.get("status") == "error"}
        self._finish(run_id, status=status, calls=len(answered), failed=errors)
        return status
