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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..fs.files import atomic_write_text
from ..providers.base import ModelRequest
from ..redact import redact_data

__all__ = ["load_request", "request_path", "save_request"]


def request_path(artifacts: Path, task_id: str, n: int) -> Path:
    return artifacts / task_id / f"request-{n}.json"


def _part(folder: Path, value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    path = folder / f"part-{sha}.json"
    if not path.exists():
        atomic_write_text(path, text + "\n", durable=False)
    return sha


def save_request(
    artifacts: Path, task_id: str, n: int, request: ModelRequest, redact: Callable[[str], str]
) -> Path:
    """Keep call ``n``'s request (redacted) under ``artifacts/<task_id>/``; returns its index."""
    folder = artifacts / task_id
    data = redact_data(request.model_dump(mode="json"), redact)
    index = {
        "call_id": data.get("call_id"),
        "model": data.get("model"),
        "max_output_tokens": data.get("max_output_tokens"),
        "system": _part(folder, data.get("system", [])),
        "tools": _part(folder, data.get("tools", [])),
        "messages": [_part(folder, m) for m in data.get("messages", [])],
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
