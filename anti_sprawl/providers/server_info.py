"""The context window a local OpenAI-compatible server says it serves, where it says so.

A node's ``token_budget`` is the cap of one call, input plus output; above the server's window
the call fails at the server after the prompt was read (minutes on a CPU), or is cut silently.
So before a run, the window is read where the server publishes it: llama.cpp's ``/v1/models``
(``data[].meta.n_ctx``, the window it was started with) and Ollama's ``/api/show``
(``num_ctx`` in the model's parameters, else ``<arch>.context_length`` of its model info;
asked only of a server whose ``/api/version`` says it is Ollama).
Servers that say nothing (vLLM's ``max_model_len`` is read too; LM Studio says nothing) get no
check. Only the user's own ``--base-url`` is asked, with no key and a short timeout.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ServedWindow", "served_context_window"]

_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServedWindow:
    """A server's context window in tokens, and where it said so."""

    tokens: int
    source: str


def _fetch(url: str, body: dict[str, Any] | None, timeout: float) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read(1_000_000))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_models(listing: Any, model: str) -> int | None:
    if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
        return None
    entries = [e for e in listing["data"] if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in named:
        meta = entry.get("meta")
        found = _positive(meta.get("n_ctx")) if isinstance(meta, dict) else None
        found = found or _positive(entry.get("max_model_len"))  # vLLM
        if found:
            return found
    return None


def _from_ollama(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    for line in str(info.get("parameters") or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    details = info.get("model_info")
    if isinstance(details, dict):
        for key, value in details.items():
            if key.endswith(".context_length") and _positive(value):
                return int(value)
    return None


def served_context_window(
    base_url: str, model: str, *, timeout: float = _TIMEOUT
) -> ServedWindow | None:
    """The window the server at ``base_url`` (``.../v1``) serves ``model`` with, or None."""
    root = base_url.rstrip("/")
    models_url = f"{root}/models"
    found = _from_models(_fetch(models_url, None, timeout), model)
    if found:
        return ServedWindow(found, f"{models_url} (n_ctx)")
    parts = urlsplit(root)
    path = parts.path.removesuffix("/v1")
    api = urlunsplit((parts.scheme, parts.netloc, f"{path}/api", "", ""))
    version = _fetch(f"{api}/version", None, timeout)
    if not isinstance(version, dict) or "version" not in version:
        return None  # not Ollama: its /api/show is a POST no other server should get
    show_url = f"{api}/show"
    found = _from_ollama(_fetch(show_url, {"model": model}, timeout))
    if found:
        return ServedWindow(found, f"{show_url} (num_ctx)")
    return None
