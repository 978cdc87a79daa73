"""The rates page's arithmetic (odradek.console.rates.RateSampler.series) on given samples:
records per second between consecutive samples, a counter going down read as 0, a name that
appears later starting from its first sample."""

from __future__ import annotations

from typing import Any, cast

from odradek.console.rates import RateSampler, Sample


def test_rates_between_samples() -> None:
    sampler = RateSampler(cast(Any, None), interval_ms=500)
    assert sampler.series() == {"interval_ms": 500, "points": [], "error": None}
    sampler.samples.extend(
        [
            Sample(1_000, 10_000, {"t": 100}, {"g": 40}),
            Sample(1_500, 10_500, {"t": 150}, {"g": 40}),
            Sample(2_500, 11_500, {"t": 10, "u": 5}, {"g": 90, "h": 7}),  # t re-created
        ]
    )
    points = sampler.series()["points"]
    assert points == [
        {"time_ms": 1_500, "produce": {"t": 100.0}, "consume": {"g": 0.0}},
        {"time_ms": 2_500, "produce": {"t": 0.0, "u": 0.0}, "consume": {"g": 50.0, "h": 0.0}},
    ]


def test_history_is_bounded() -> None:
    sampler = RateSampler(cast(Any, None), history_samples=3)
    for i in range(10):
        sampler.samples.append(Sample(i, i * 1000, {"t": i * 10}, {}))
    points = sampler.series()["points"]
    assert [p["time_ms"] for p in points] == [8, 9]
    assert all(p["produce"] == {"t": 10.0} for p in points)
