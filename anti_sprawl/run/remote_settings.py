"""What ``--executor dask`` is told by the CLI: the scheduler, and the provider by name.

A leaf of plain data, so the CLI and the evaluation can describe a Dask run without importing
Dask (``dask_executor.py`` does, when the run starts).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from ..providers.scripted import Script

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "DaskSettings", "ProviderSpec"]

# What one remote attempt may send back (its commit bundle, manifests, transcript and logs):
# a node's work is source text; a result over this is refused, not unpacked.
DEFAULT_MAX_RESULT_BYTES = 64 * 1024 * 1024


class ProviderSpec(BaseModel):
    """Which provider a worker builds, by name: keys come from the worker's environment."""

    name: str
    model: str | None = None
    base_url: str | None = None
    script: Script | None = None  # the scripted provider's turns (tests and the demo)
    timeout: float | None = None  # --request-timeout: the overall deadline of one call


@dataclass(frozen=True)
class DaskSettings:
    """``--executor dask``: where the cluster is and how remote nodes are run."""

    scheduler: str
    provider: ProviderSpec
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 30.0
    connect_timeout: float = 10.0
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
