"""Orchestration settings, read from the environment so that a served deployment, a Dask
worker and ``l4 diagnose`` all agree without passing flags around.

=====================  ==========================================================  =========
variable               meaning                                                     default
=====================  ==========================================================  =========
L4_DASK_ADDRESS        ``tcp://host:8786``: parse node files on that Dask cluster  (local)
L4_TASK_RUNNER         ``auto``, ``thread``, ``pool``, ``process`` or ``dask``     ``auto``
L4_RETRIES             retries of reading and storage tasks                        3
L4_RETRY_DELAY         first retry delay in seconds (doubles on each retry)        1
L4_SCAN_CACHE_DAYS     how long a parsed node file stays reusable (0: forever)     30
=====================  ==========================================================  =========

``auto`` parses in the flow's threads, and when more than
``flows.parsing.PROCESS_POOL_MIN_BYTES`` of logs are not cached yet, those threads hand the
scanning to a pool of plain scanner processes (``pool``, what the engine does).
``process`` is Prefect's own process pool (every worker imports Prefect: slower, kept for
those who want it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

RUNNERS = ("auto", "thread", "pool", "process", "dask")


class SettingsError(ValueError):
    """A setting with a value l4 cannot use (the message names the variable)."""


@dataclass(frozen=True)
class FlowSettings:
    dask_address: str | None = None
    task_runner: str = "auto"
    retries: int = 3
    retry_delay: float = 1.0
    scan_cache_days: float = 30.0


def _number(name: str, default: float, cast: Callable[[str], float]) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < 0:
        raise SettingsError(f"{name}={raw!r} must not be negative")
    return value


def load_settings() -> FlowSettings:
    """Settings from the environment (see the module docstring)."""
    address = os.environ.get("L4_DASK_ADDRESS", "").strip() or None
    runner = os.environ.get("L4_TASK_RUNNER", "").strip().lower() or ("dask" if address else "auto")
    if runner not in RUNNERS:
        raise SettingsError(f"L4_TASK_RUNNER={runner!r}: expected one of {', '.join(RUNNERS)}")
    if address and not address.startswith(("tcp://", "tls://", "ucx://", "inproc://")):
        raise SettingsError(
            f"L4_DASK_ADDRESS={address!r}: expected a scheduler address like tcp://host:8786"
        )
    return FlowSettings(
        dask_address=address,
        task_runner=runner,
        retries=int(_number("L4_RETRIES", 3, int)),
        retry_delay=_number("L4_RETRY_DELAY", 1.0, float),
        scan_cache_days=_number("L4_SCAN_CACHE_DAYS", 30.0, float),
    )


def retry_delays(settings: FlowSettings) -> list[float]:
    """Exponential backoff: ``d, 2d, 4d, ...`` (one delay per retry)."""
    return [settings.retry_delay * 2**i for i in range(settings.retries)]
