"""Flux injection's own Prometheus metrics, served on the webhook's /metrics
beside the budget decisions (same registry).

Rule: every /mutate answer is counted by outcome (patched: the entry was set
or changed; unchanged: the release already carried it, or is not a tenant
release; refused: the entry could not be computed, fail closed); the loop
counts the releases it writes, the failures by stage (inputs: a release
whose entry cannot be computed; write: the patch was refused; pass: a whole
pass failed; watch: a watch broke and restarts), the releases failing now,
and its lag: from a watch event reporting a changed input to that
namespace's releases being reconciled.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "cozyrender_flux"
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)
MUTATION_OUTCOMES = ("patched", "unchanged", "refused")
FAILURE_STAGES = ("inputs", "write", "pass", "watch")


class FluxMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.mutations = Counter(f"{PREFIX}_mutations", "HelmRelease admissions answered by /mutate, by outcome "
                                 "(patched, unchanged, refused)", ["outcome"], registry=r)
        self.writes = Counter(f"{PREFIX}_loop_writes", "Tenant releases whose postRenderers the loop rewrote",
                              registry=r)
        self.failures = Counter(f"{PREFIX}_loop_failures", "Loop failures by stage (inputs: an entry that cannot "
                                "be computed; write: a refused patch; pass: a failed pass; watch: a broken watch)",
                                ["stage"], registry=r)
        self.failing = Gauge(f"{PREFIX}_releases_failing", "Tenant releases whose entry the loop cannot compute now",
                             registry=r)
        self.lag = Histogram(f"{PREFIX}_loop_lag_seconds", "Time from a watch event reporting a changed input to "
                             "its namespace's releases reconciled", buckets=LAG_BUCKETS, registry=r)
        self.passes = Counter(f"{PREFIX}_loop_passes", "Namespaces reconciled by the loop", registry=r)
        for outcome in MUTATION_OUTCOMES:  # every series exists from the start (rate() over a new series)
            self.mutations.labels(outcome)
        for stage in FAILURE_STAGES:
            self.failures.labels(stage)


def mutation_outcome(review: dict) -> str:
    """The outcome of one /mutate answer."""
    response = review.get("response") or {}
    if not response.get("allowed"):
        return "refused"
    return "patched" if response.get("patch") else "unchanged"
