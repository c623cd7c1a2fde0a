"""berth_adapter: write a berth adapter in Python (3.9+, standard library only).

berth runs an adapter it has no built-in implementation for as ``berth-adapter-<name> <verb>`` from PATH, one
process per verb, with one JSON request on stdin and one JSON reply expected on stdout (protocol 1, described in
berth's ``adapters/README.md``). ``run_adapter`` does that plumbing: it reads and checks the request, calls the
matching function of your adapter, writes the reply and exits. It is the twin of the JavaScript SDK
(``berth/adapter-sdk``) and answers every request the same way::

    #!/usr/bin/env python3
    from berth_adapter import AdapterFailure, run_adapter

    def provision(slice, config):
        ...
        return created

    run_adapter(
        provision=provision,
        resolve=lambda slice, config: f"myserver://host/{slice.name}",
        teardown=teardown,
    )

This file is one module with no dependencies: copy it beside your adapter, or put the folder that holds it on
PYTHONPATH (berth ships it as ``dist/berth_adapter.py`` beside its CLI).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple

__all__ = [
    "ADAPTER_ERROR_KINDS",
    "PROTOCOL_VERSION",
    "STANDINGS",
    "VERBS",
    "AdapterFailure",
    "Answer",
    "Capabilities",
    "Scope",
    "Slice",
    "answer",
    "check_request",
    "run_adapter",
]

#: The protocol version this SDK speaks; berth sends it as ``protocol`` in every request.
PROTOCOL_VERSION = 1

VERBS = ("capabilities", "provision", "resolve", "teardown", "clone", "list", "standing")

#: Whose a slice's name is on its server: ``standing`` answers one of these.
STANDINGS = ("missing", "ours", "foreign")

#: What went wrong, as berth understands it: the server could not be reached, refused the credentials, lacks a grant,
#: the slice's name is taken by something berth does not own, the slice is not owned by berth, the request or the
#: adapter's configuration is invalid, or anything else.
ADAPTER_ERROR_KINDS = ("unreachable", "authentication", "grant", "taken", "not-owned", "invalid", "failed")

#: Requests are small; anything bigger is not from berth.
INPUT_LIMIT = 4 * 1024 * 1024

Config = Mapping[str, Any]


@dataclass(frozen=True)
class Slice:
    """One world's private piece of a store."""

    #: the adapter name as written in berth.toml
    adapter: str
    project: str
    world: str
    service: str
    #: a safe identifier (``<project>_<world slug>_<service>``, letters, digits and ``_``), unique per server
    name: str
    #: which berth installation asks: mark it on what you create, and let ``list`` return only its slices
    owner: str
    #: a folder berth made for the project's embedded slices (mode 0700); an adapter may keep its files there
    storage: str
    #: the same keys as the request's ``config``
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the service's resolved ``admin_url``, when it has one; it may hold a password: never print it
    admin_url: Optional[str] = None


@dataclass(frozen=True)
class Scope:
    """Where ``list`` looks: the store of one service, without a particular slice."""

    adapter: str
    #: ``list`` returns only the slices marked with this owner
    owner: str
    storage: str
    options: Mapping[str, Any] = field(default_factory=dict)
    admin_url: Optional[str] = None


@dataclass(frozen=True)
class Capabilities:
    #: the adapter can make one slice a copy of another (``clone``)
    clone: bool


class AdapterFailure(Exception):
    """Raise this from an adapter function to fail with a kind berth understands; any other exception is a crash."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        # passed on as given, as the JavaScript SDK does: berth counts a kind it does not know as "failed"
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Answer:
    """A reply, the exit code to end with (1 after a crash of the adapter's own code), and what to print on stderr."""

    reply: Dict[str, Any]
    exit_code: int
    stderr: Optional[str] = None


# --- checking the request --------------------------------------------------------------------------------------------

_SLICE_KEYS = ("adapter", "project", "world", "service", "name", "owner", "storage")
_SCOPE_KEYS = ("adapter", "owner", "storage")


def _check_slice_like(value: Any, at: str, keys: Sequence[str]) -> Optional[str]:
    if not isinstance(value, dict):
        return f"{at} must be an object"
    for key in keys:
        if not isinstance(value.get(key), str):
            return f"{at}.{key} must be a string"
    if "adminUrl" in value and not isinstance(value["adminUrl"], str):
        return f"{at}.adminUrl must be a string"
    if not isinstance(value.get("options"), dict):
        return f"{at}.options must be an object"
    return None


def _json(value: Any) -> str:
    # JSON.stringify's spelling, so that messages read the same as the JavaScript SDK's
    return "undefined" if value is _MISSING else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_MISSING = object()


def check_request(request: Any, verb: Optional[str]) -> Tuple[bool, Any]:
    """Checks that ``request`` (parsed JSON) is a request of this protocol, for the verb the executable was started
    with. Returns ``(True, request)`` or ``(False, a sentence)``."""
    if not isinstance(request, dict):
        return False, "the request is not a JSON object"
    protocol = request.get("protocol", _MISSING)
    # True == 1 in Python: the protocol must be the number itself
    if isinstance(protocol, bool) or protocol != PROTOCOL_VERSION:
        return False, f"this adapter speaks protocol {PROTOCOL_VERSION}; the request is for {_json(protocol)}"
    requested = request.get("verb", _MISSING)
    if not isinstance(requested, str) or requested not in VERBS:
        return False, f"unknown verb {_json(requested)} (expected one of {', '.join(VERBS)})"
    if verb is not None and requested != verb:
        return False, f"started as `{verb}` but the request is for {_json(requested)}"
    if not isinstance(request.get("config"), dict):
        return False, "request.config must be an object"
    if requested == "capabilities":
        problem = None
    elif requested == "list":
        problem = _check_slice_like(request.get("scope"), "request.scope", _SCOPE_KEYS)
    else:
        problem = _check_slice_like(request.get("slice"), "request.slice", _SLICE_KEYS)
        if problem is None and requested == "clone":
            problem = _check_slice_like(request.get("from"), "request.from", _SLICE_KEYS)
    return (True, request) if problem is None else (False, problem)


def _slice_of(value: Mapping[str, Any]) -> Slice:
    # unknown keys may be added to the protocol later: only the known ones are read
    return Slice(
        adapter=value["adapter"],
        project=value["project"],
        world=value["world"],
        service=value["service"],
        name=value["name"],
        owner=value["owner"],
        storage=value["storage"],
        options=value["options"],
        admin_url=value.get("adminUrl"),
    )


def _scope_of(value: Mapping[str, Any]) -> Scope:
    return Scope(
        adapter=value["adapter"],
        owner=value["owner"],
        storage=value["storage"],
        options=value["options"],
        admin_url=value.get("adminUrl"),
    )


# --- answering -------------------------------------------------------------------------------------------------------


class _BadResult(Exception):
    """A function of the adapter returned something of the wrong type: a bug in the adapter, reported like a crash."""


def _describe(value: Any) -> str:
    # in the JavaScript SDK's words (a function that returns nothing returns undefined there)
    if value is None:
        return "undefined"
    if isinstance(value, (list, tuple)):
        return "an array"
    kind = (
        "boolean"
        if isinstance(value, bool)
        else "number"
        if isinstance(value, (int, float))
        else "string"
        if isinstance(value, str)
        else "object"
    )
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{kind} {text}"


def _expect(verb: str, what: str, value: Any, test: Callable[[Any], bool]) -> Any:
    if not test(value):
        raise _BadResult(f"{verb} returned {_describe(value)}, not {what}")
    return value


def _refuse(kind: str, error: str) -> Answer:
    return Answer(reply={"ok": False, "error": error, "kind": kind}, exit_code=0)


def _can_clone(definition: Mapping[str, Any]) -> bool:
    # an adapter without a clone function cannot clone, whatever it declares
    declared = definition.get("capabilities")
    return definition.get("clone") is not None and (declared is None or bool(declared.clone))


def _dispatch(definition: Mapping[str, Any], request: Mapping[str, Any]) -> Dict[str, Any]:
    verb = request["verb"]
    config = request["config"]
    if verb == "capabilities":
        return {"ok": True, "clone": _can_clone(definition), "standing": definition.get("standing") is not None}
    if verb == "provision":
        created = definition["provision"](_slice_of(request["slice"]), config)
        return {"ok": True, "created": _expect("provision", "a boolean", created, lambda v: isinstance(v, bool))}
    if verb == "resolve":
        url = definition["resolve"](_slice_of(request["slice"]), config)
        return {"ok": True, "url": _expect("resolve", "a non-empty string", url, lambda v: isinstance(v, str) and v != "")}
    if verb == "teardown":
        definition["teardown"](_slice_of(request["slice"]), config)
        return {"ok": True}
    if verb == "clone":
        if not _can_clone(definition):
            return {"ok": False, "kind": "invalid", "error": "this adapter cannot clone"}
        definition["clone"](_slice_of(request["from"]), _slice_of(request["slice"]), config)
        return {"ok": True}
    if verb == "standing":
        if definition.get("standing") is None:
            return {"ok": False, "kind": "invalid", "error": "this adapter does not tell whose a name is"}
        standing = definition["standing"](_slice_of(request["slice"]), config)
        checked = _expect("standing", '"missing", "ours" or "foreign"', standing, lambda v: v in STANDINGS)
        return {"ok": True, "standing": checked}
    # list
    if definition.get("list") is None:
        return {"ok": False, "kind": "invalid", "error": "this adapter does not list its slices"}
    names = definition["list"](_scope_of(request["scope"]), config)
    checked = _expect(
        "list",
        "an array of strings",
        names,
        lambda v: isinstance(v, (list, tuple)) and all(isinstance(n, str) for n in v),
    )
    return {"ok": True, "names": list(checked)}


def answer(definition: Mapping[str, Any], verb: Optional[str], text: str) -> Answer:
    """Answers one request (the text read from stdin) for the verb the executable was started with, without touching
    the process: for your own tests. ``definition`` maps ``provision``, ``resolve``, ``teardown`` and optionally
    ``clone``, ``list``, ``standing`` and ``capabilities`` to your functions. Never raises: an ``AdapterFailure`` becomes
    ``{"ok": false, "error", "kind"}`` with exit code 0; any other exception a reply without a kind, exit code 1 and
    its traceback for stderr."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return _refuse("invalid", "the request on stdin is not JSON")
    ok, checked = check_request(parsed, verb)
    if not ok:
        return _refuse("invalid", checked)
    try:
        return Answer(reply=_dispatch(definition, checked), exit_code=0)
    except AdapterFailure as failure:
        return _refuse(failure.kind, failure.message)
    except Exception as crash:  # noqa: BLE001 — any other exception is the adapter's crash, reported as such
        error = str(crash) or type(crash).__name__
        return Answer(reply={"ok": False, "error": error}, exit_code=1, stderr=traceback.format_exc())


def _read_input() -> str:
    data = sys.stdin.buffer.read(INPUT_LIMIT + 1)
    if len(data) > INPUT_LIMIT:
        raise ValueError(f"the request on stdin is larger than {INPUT_LIMIT} bytes")
    return data.decode("utf-8")


def run_adapter(
    *,
    provision: Callable[[Slice, Config], bool],
    resolve: Callable[[Slice, Config], str],
    teardown: Callable[[Slice, Config], None],
    clone: Optional[Callable[[Slice, Slice, Config], None]] = None,
    list: Optional[Callable[[Scope, Config], List[str]]] = None,  # noqa: A002 — the verb's name
    capabilities: Optional[Capabilities] = None,
    standing: Optional[Callable[[Slice, Config], str]] = None,
) -> NoReturn:
    """Runs the adapter as berth's executable: reads the request from stdin, answers it with one line of JSON on
    stdout and exits — also when the adapter's code left threads or connections open, which would otherwise keep berth
    waiting. ``capabilities`` defaults to ``Capabilities(clone=True)`` when ``clone`` is given. ``standing`` (optional)
    answers whose a slice's name is on its server now: "missing", "ours" (marked with ``slice.owner``) or "foreign"."""
    definition = {
        "provision": provision,
        "resolve": resolve,
        "teardown": teardown,
        "clone": clone,
        "list": list,
        "capabilities": capabilities,
        "standing": standing,
    }
    verb = sys.argv[1] if len(sys.argv) > 1 else None
    if sys.stdin.isatty():
        sys.stderr.write(
            f"usage: {sys.argv[0]} <{'|'.join(VERBS)}> < request.json\n"
            "berth runs this program itself, one verb at a time, with a JSON request on stdin.\n"
        )
        sys.stderr.flush()
        os._exit(2)
    try:
        result = answer(definition, verb, _read_input())
    except (OSError, ValueError) as cause:
        result = _refuse("invalid", str(cause))
    if result.stderr is not None:
        sys.stderr.write(result.stderr)
        sys.stderr.flush()
    sys.stdout.write(json.dumps(result.reply, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    # os._exit: neither a non-daemon thread nor an atexit hook of the adapter's libraries may hold the process
    os._exit(result.exit_code)
