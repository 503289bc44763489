"""Memory screening: the seed's four checks, adapted to repository scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from anti_sprawl.context.memory import MemoryFact, screen_memory

NOW = datetime(2026, 10, 2, tzinfo=UTC)
LATER = NOW + timedelta(days=30)


def _fact(text: str, source: str, scope: list[str], expires: datetime = LATER) -> MemoryFact:
    return MemoryFact(text=text, source=source, scope=scope, expires=expires)


def test_four_checks_mirror_the_seed_example() -> None:
    records = [
        _fact("orders use the event bus since v3", "system_record", ["orders/**"]),
        _fact("prefers small commits", "model_inferred", ["orders/"]),
        _fact("billing card handling", "system_record", ["billing/**"]),
        _fact("old plan: sync HTTP", "system_record", ["orders/**"], expires=NOW),
        _fact("unknown provenance", "scraped", ["orders/**"]),
        _fact("no scope at all", "user_stated", []),
    ]
    screen = screen_memory(records, node_scope=["orders/service.py", "orders/events/"], now=NOW)
    assert [f.text for f in screen.facts] == ["orders use the event bus since v3"]
    assert [f.text for f in screen.hypotheses] == ["prefers small commits"]
    assert [(f.text, why) for f, why in screen.dropped] == [
        ("billing card handling", "out_of_scope"),
        ("old plan: sync HTTP", "expired"),
        ("unknown provenance", "unknown_source"),
        ("no scope at all", "out_of_scope"),
    ]


def test_naive_expiry_is_utc_and_user_stated_is_a_fact() -> None:
    naive_future = datetime(2026, 10, 2, 0, 0, 1)
    fact = _fact("use pytest", "user_stated", ["**"], expires=naive_future)
    assert screen_memory([fact], node_scope=["tests/"], now=NOW).facts == [fact]
    assert screen_memory([fact], node_scope=["tests/"], now=NOW + timedelta(seconds=1)).dropped
