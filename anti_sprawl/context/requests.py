"""The exact request of each model call, kept with the node's artifacts for the HTML run report.

A manifest (context/manifest.py) says what went into a call; a reviewer sometimes needs the
call itself: the system blocks, every message and the tool schemas, as the provider was given
them (``providers.base.ModelRequest``, before the provider's wire format). A conversation's
requests repeat each other (call n+1 is call n plus a turn), so whole requests per call would
grow with the square of the conversation. Each part is stored once instead, by the SHA-256 of
its redacted JSON, as ``artifacts/<task>/part-<sha>.json``; ``request-<n>.json`` lists the
parts of call ``n`` (``n`` as in the call's manifest). Both names are flat under the task's
folder, so a Dask node's staged files come back with its other artifacts
(run/remote_result.py keeps ``artifacts/<task>/<name>`` only); not under ``manifests/``,
whose ``*.json`` are all manifests. Everything is redacted before it is hashed and written,
like the manifests (run/node_work.py). Written without an fsync (fs/files.py): a power loss
may lose the newest, and ``load_request`` then says it was not kept.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from ..fs.files import atomic_write_text
from ..providers.base import ModelRequest
from ..redact import redact_data

__all__ = ["load_request", "request_path", "save_request"]


def request_path(artifacts: Path, task_id: str, n: int) -> Path:
    return artifacts / task_id / f"request-{n}.json"


_KEPT = 256  # parts' redacted text kept per redactor (a run's tools and system among them)
_kept: WeakKeyDictionary[Callable[[str], str], OrderedDict[bytes, tuple[str, str]]]
_kept = WeakKeyDictionary()
_kept_lock = threading.Lock()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _redacted(value: Any, redact: Callable[[str], str]) -> tuple[str, str]:
    """The canonical JSON of ``value`` with every string redacted, and its SHA-256; kept by
    the digest of the unredacted JSON, per redactor: every call of a run sends the same tools
    and system, and each call repeats the one before's messages (issue 29)."""
    key = hashlib.blake2b(_canonical(value).encode("utf-8", "surrogatepass")).digest()
    with _kept_lock:
        kept = _kept.setdefault(redact, OrderedDict())
        found = kept.get(key)
        if found is not None:
            kept.move_to_end(key)
            return found
    text = _canonical(redact_data(value, redact))
    found = (text, hashlib.sha256(text.encode("utf-8")).hexdigest())
    with _kept_lock:
        kept[key] = found
        if len(kept) > _KEPT:
            kept.popitem(last=False)
    return found


def _part(folder: Path, value: Any, redact: Callable[[str], str]) -> str:
    text, sha = _redacted(value, redact)
    path = folder / f"part-{sha}.json"
    if not path.exists():
        atomic_write_text(path, text + "\n", durable=False)
    return sha


def save_request(
    artifacts: Path, task_id: str, n: int, request: ModelRequest, redact: Callable[[str], str]
) -> Path:
    """Keep call ``n``'s request (redacted) under ``artifacts/<task_id>/``; returns its index."""
    folder = artifacts / task_id
    data = request.model_dump(mode="json")
    index = {
        "call_id": redact_data(data.get("call_id"), redact),
        "model": redact_data(data.get("model"), redact),
        "max_output_tokens": data.get("max_output_tokens"),
        "system": _part(folder, data.get("system", []), redact),
        "tools": _part(folder, data.get("tools", []), redact),
        "messages": [_part(folder, m, redact) for m in data.get("messages", [])],
    }
    path = request_path(artifacts, task_id, n)
    atomic_write_text(path, json.dumps(index, indent=2) + "\n", durable=False)
    return path


def _read(folder: Path, sha: Any) -> Any:
    if not isinstance(sha, str) or not sha.isalnum():
        raise ValueError("bad part name")
    return json.loads((folder / f"part-{sha}.json").read_text(encoding="utf-8"))


def load_request(artifacts: Path, task_id: str, n: int) -> dict[str, Any] | None:
    """Call ``n``'s request as it was given to the provider, or None when it was not kept
    (runs before this module, a part lost or damaged)."""
    folder = artifacts / task_id
    try:
        index = json.loads(request_path(artifacts, task_id, n).read_text(encoding="utf-8"))
        return {
            "call_id": index.get("call_id"),
            "model": index.get("model"),
            "max_output_tokens": index.get("max_output_tokens"),
            "system": _read(folder, index.get("system")),
            "messages": [_read(folder, sha) for sha in index.get("messages", [])],
            "tools": _read(folder, index.get("tools")),
        }
    except (OSError, ValueError, AttributeError, TypeError):
        return None
