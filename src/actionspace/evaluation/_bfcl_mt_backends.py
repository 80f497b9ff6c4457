"""BFCL's executable multi-turn backends as actionspace tools, with honest read/write sets.

The backend classes (``GorillaFileSystem`` … ``VehicleControlAPI``) are BFCL's own code, imported
from the pinned, sha256-verified ``bfcl-eval`` wheel (a zip on ``sys.path``); nothing is copied.

Read/write sets, one resource per backend instance. Each class keeps its state in a handful of
attributes that most methods touch together (a login flag guards almost every call, ids come
from one counter or one seeded random generator), so a finer split would be a guess BFCL's
order-dependent turns punish. What the table below does split honestly:

* a method that changes any state, public or hidden, is a write of ``<backend>:``: ``cd`` (the
  current directory is hidden state every file call reads), ``get_flight_cost`` (fills the cache
  ``book_flight`` prices from), ``get_current_speed`` (draws from the instance's random generator);
* a method that only looks at state is a read of ``<backend>:``, so reads of one backend run
  together and never beside one of its writes;
* a method that reads no instance state that can change (unit conversions, fixed lookup tables)
  declares no resource at all; ``MathAPI`` is pure (``effect="none"``).

Tools are effect ``write`` with ``idempotency="none"``: a call re-sent after it committed replays
the recorded observation instead of running the method again.

:data:`DOC_ERRATA` lists the few places where BFCL's function doc contradicts BFCL's own data and
ground truth; each widens one argument's schema and is reported with the figures.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from actionspace.errors import ConfigurationError, ToolDefinitionError
from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_schema import to_input_schema

__all__ = [
    "BACKENDS",
    "DOC_ERRATA",
    "Backend",
    "ParsedCall",
    "bfcl_module",
    "instantiate",
    "parse_call",
    "tool_specs",
]

_PACKAGE: Final = "bfcl_eval.eval_checker.multi_turn_eval"


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """One BFCL backend class and how its methods touch its state."""

    class_name: str
    module: str
    """File stem under ``func_source_code``."""
    doc_file: str
    """File under ``data/multi_turn_func_doc``."""
    resource: str
    """The resource naming this instance's state, e.g. ``"fs:"``; empty for a stateless class."""
    writes: frozenset[str] = frozenset()
    """Methods that change state (public attributes or hidden ones later calls depend on)."""
    constant: frozenset[str] = frozenset()
    """Methods that read no state that any method can change: no resource."""

    def effect(self, method: str) -> str:
        if not self.resource:
            return "none"
        return "write" if method in self.writes else "read"

    def reads(self, method: str) -> tuple[str, ...]:
        if not self.resource or method in self.constant or method in self.writes:
            return ()
        return (self.resource,)

    def write_set(self, method: str) -> tuple[str, ...]:
        return (self.resource,) if self.resource and method in self.writes else ()


BACKENDS: Final[Mapping[str, Backend]] = {
    b.class_name: b
    for b in (
        Backend(
            class_name="GorillaFileSystem",
            module="gorilla_file_system",
            doc_file="gorilla_file_system.json",
            resource="fs:",
            writes=frozenset({"cd", "mkdir", "touch", "echo", "mv", "rm", "rmdir", "cp"}),
        ),
        Backend(class_name="MathAPI", module="math_api", doc_file="math_api.json", resource=""),
        Backend(
            class_name="MessageAPI",
            module="message_api",
            doc_file="message_api.json",
            resource="message:",
            writes=frozenset({"message_login", "send_message", "delete_message", "add_contact"}),
        ),
        Backend(
            class_name="TwitterAPI",
            module="posting_api",
            doc_file="posting_api.json",
            resource="twitter:",
            writes=frozenset(
                {
                    "authenticate_twitter",
                    "comment",
                    "follow_user",
                    "mention",
                    "post_tweet",
                    "retweet",
                    "unfollow_user",
                }
            ),
        ),
        Backend(
            class_name="TicketAPI",
            module="ticket_api",
            doc_file="ticket_api.json",
            resource="ticket:",
            writes=frozenset(
                {"create_ticket", "close_ticket", "resolve_ticket", "edit_ticket", "ticket_login", "logout"}
            ),
        ),
        Backend(
            class_name="TradingBot",
            module="trading_bot",
            doc_file="trading_bot.json",
            resource="trading:",
            writes=frozenset(
                {
                    "add_to_watchlist",
                    "cancel_order",
                    "fund_account",
                    "place_order",
                    "remove_stock_from_watchlist",
                    "trading_login",
                    "trading_logout",
                    "withdraw_funds",
                }
            ),
            constant=frozenset({"get_current_time", "get_symbol_by_name", "get_available_stocks"}),
        ),
        Backend(
            class_name="TravelAPI",
            module="travel_booking",
            doc_file="travel_booking.json",
            resource="travel:",
            writes=frozenset(
                {
                    "authenticate_travel",
                    "book_flight",
                    "cancel_booking",
                    "get_flight_cost",
                    "purchase_insurance",
                    "register_credit_card",
                    "set_budget_limit",
                }
            ),
            constant=frozenset(
                {
                    "compute_exchange_rate",
                    "get_budget_fiscal_year",
                    "get_nearest_airport_by_city",
                    "list_all_airports",
                }
            ),
        ),
        Backend(
            class_name="VehicleControlAPI",
            module="vehicle_control",
            doc_file="vehicle_control.json",
            resource="vehicle:",
            writes=frozenset(
                {
                    "activateParkingBrake",
                    "adjustClimateControl",
                    "fillFuelTank",
                    "get_current_speed",
                    "get_outside_temperature_from_google",
                    "lockDoors",
                    "pressBrakePedal",
                    "releaseBrakePedal",
                    "setCruiseControl",
                    "setHeadlights",
                    "set_navigation",
                    "startEngine",
                }
            ),
            constant=frozenset(
                {
                    "display_log",
                    "estimate_distance",
                    "find_nearest_tire_shop",
                    "gallon_to_liter",
                    "get_outside_temperature_from_weather_com",
                    "get_zipcode_based_on_city",
                    "liter_to_gallon",
                }
            ),
        ),
    )
}
"""The eight backends of the multi-turn categories, by BFCL class name."""

DOC_ERRATA: Final[Mapping[tuple[str, str], Mapping[str, Any]]] = {
    ("close_ticket", "ticket_id"): {"type": ["integer", "string"]},
}
"""(method, argument) → schema keywords replacing the doc's. ``close_ticket``'s doc says an integer,
but scenarios store ids such as ``"ticket_001"`` and the ground truth of ``*_173`` closes one by it."""

_import_lock = threading.Lock()


_VERIFIED: dict[Path, tuple[int, int]] = {}
"""Wheels whose sha256 matched, with the (size, mtime) they had then: not hashed again unless changed."""


def _wheel(cache_dir: Path | None) -> Path:
    """The verified wheel: its code is imported straight from the zip."""
    _bfcl_data.fetch(cache_dir)
    cache = cache_dir if cache_dir is not None else _bfcl_data.default_cache_dir()
    wheel = cache / _bfcl_data.WHEEL
    if not wheel.is_file():
        _bfcl_data._download(cache)
    stat = wheel.stat()
    stamp = (stat.st_size, stat.st_mtime_ns)
    if _VERIFIED.get(wheel) != stamp:
        _bfcl_data._verify(wheel)
        _VERIFIED[wheel] = stamp
    return wheel


def bfcl_module(name: str, cache_dir: Path | None = None) -> ModuleType:
    """Import ``bfcl_eval.eval_checker.multi_turn_eval.<name>`` from the pinned wheel.

    ``name`` is e.g. ``"multi_turn_checker"`` or ``"func_source_code.trading_bot"``. Raises
    BfclDataError when the wheel cannot be fetched, ConfigurationError when a backend needs a
    package that is not installed (``MathAPI`` needs ``mpmath``).
    """
    loaded = sys.modules.get(f"{_PACKAGE}.{name}")
    if loaded is not None:
        return loaded
    with _import_lock:
        if not any(m.startswith("bfcl_eval") for m in sys.modules):
            path = str(_wheel(cache_dir))
            if path not in sys.path:
                sys.path.append(path)
        try:
            return importlib.import_module(f"{_PACKAGE}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name and not exc.name.startswith("bfcl_eval"):
                raise ConfigurationError(
                    f"BFCL's {name} needs the package {exc.name!r}: pip install {exc.name}"
                ) from exc
            raise


def instantiate(class_name: str, initial_config: Mapping[str, Any], *, long_context: bool) -> Any:
    """A fresh backend instance loaded the way BFCL's checker loads it (a deep copy of the config)."""
    backend = BACKENDS[class_name]
    instance = getattr(bfcl_module(f"func_source_code.{backend.module}"), class_name)()
    if backend.resource:
        scenario = copy.deepcopy(dict(initial_config.get(class_name, {})))
        instance._load_scenario(scenario, long_context=long_context)
    return instance


_METHOD_NAMES: dict[type, tuple[str, ...]] = {}
_SCHEMAS: dict[tuple[str, str, bool], dict[str, Any]] = {}
"""Input schemas by (class, method, errata): the same for every task, built once."""


def public_methods(instance: Any) -> dict[str, Callable[..., Any]]:
    """Bound methods BFCL exposes (its checker skips names starting with ``_``)."""
    names = _METHOD_NAMES.get(type(instance))
    if names is None:
        found = inspect.getmembers(instance, inspect.ismethod)
        names = _METHOD_NAMES[type(instance)] = tuple(n for n, _ in found if not n.startswith("_"))
    return {n: getattr(instance, n) for n in names}


def tool_specs(
    instances: Mapping[str, Any], docs: Mapping[str, Mapping[str, Any]], *, errata: bool = True
) -> list[dict[str, Any]]:
    """``Runtime.add_tool`` keyword arguments for every public method of ``instances``.

    Instances are taken in order; a later class wins a method name, as in BFCL's executor.
    ``docs`` maps a method name to its BFCL function doc; ``errata`` applies :data:`DOC_ERRATA`
    (default True). Raises ToolDefinitionError for a method without a doc.
    """
    owners: dict[str, tuple[Backend, Callable[..., Any]]] = {}
    for class_name, instance in instances.items():
        for name, method in public_methods(instance).items():
            owners[name] = (BACKENDS[class_name], method)
    out = []
    for name, (backend, method) in owners.items():
        doc = docs.get(name)
        if doc is None:
            raise ToolDefinitionError(f"{backend.class_name}.{name}: no BFCL function doc")
        schema = _SCHEMAS.get((backend.class_name, name, errata))
        if schema is None:
            schema = to_input_schema(doc.get("parameters") or {"type": "dict"}, where=name)
            for (target, argument), fix in DOC_ERRATA.items():
                if target == name and errata:
                    schema["properties"][argument] = {**schema["properties"][argument], **fix}
            _SCHEMAS[(backend.class_name, name, errata)] = schema
        out.append(
            {
                "name": name,
                "description": str(doc.get("description") or ""),
                "input_schema": schema,
                "fn": method,
                "effect": backend.effect(name),
                "reads": backend.reads(name),
                "writes": backend.write_set(name),
                "idempotency": "none",
            }
        )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedCall:
    """One ground-truth call string, read as a tool name and keyword arguments."""

    name: str
    arguments: dict[str, Any]


def parse_call(text: str, signatures: Mapping[str, inspect.Signature] | None = None) -> ParsedCall:
    """Read ``"cd(folder='doc')"`` with :mod:`ast`: literal arguments only, never evaluated code.

    Positional arguments are named from ``signatures[name]`` (the bound method's signature).
    Raises ValueError for anything that is not one call of a bare name with literal arguments.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {text!r}") from exc
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call of a plain name: {text!r}")
    name = node.func.id
    arguments: dict[str, Any] = {}
    if node.args:
        signature = (signatures or {}).get(name)
        if signature is None:
            raise ValueError(f"{text!r}: positional arguments need the signature of {name}")
        positional = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(node.args) > len(positional):
            raise ValueError(f"{text!r}: {name} takes {len(positional)} positional arguments")
        for param, arg in zip(positional, node.args, strict=False):
            arguments[param] = _literal(arg, text)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ValueError(f"{text!r}: ** arguments are not literals")
        if keyword.arg in arguments:
            raise ValueError(f"{text!r}: {keyword.arg} given twice")
        arguments[keyword.arg] = _literal(keyword.value, text)
    return ParsedCall(name=name, arguments=arguments)


def _literal(node: ast.expr, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {ast.unparse(node)} is not a literal") from exc


def signatures(instances: Mapping[str, Any]) -> dict[str, inspect.Signature]:
    """Method name → signature of the bound method, later classes winning as in BFCL."""
    out: dict[str, inspect.Signature] = {}
    for instance in instances.values():
        for name, method in public_methods(instance).items():
            out[name] = inspect.signature(method)
    return out


def load_docs(data_dir: Path, class_names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Method name → BFCL function doc, for the given classes."""
    out: dict[str, dict[str, Any]] = {}
    for class_name in class_names:
        for doc in _bfcl_data._lines(data_dir / "multi_turn_func_doc" / BACKENDS[class_name].doc_file):
            out[str(doc["name"])] = doc
    return out
