"""The webhook's Prometheus metrics, one registry per server (so tests can
run several in one process).

Rule: every decision is counted by outcome and kind and timed; the cache
reports its size per kind, its watch lag and its restarts (relists after
410 Gone, timeouts, errors); the ledger its conflicts and entries; the
certificates it serves with and checks callers against, their notAfter
(set when they are loaded, again at each reload).
"""

from __future__ import annotations

import logging
import ssl

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

log = logging.getLogger("cozyrender.webhook.metrics")

PREFIX = "cozyrender_webhook"
# Admission budgets are a few milliseconds; the API server gives up at timeoutSeconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.decisions = Counter(f"{PREFIX}_decisions", "Admission decisions by outcome "
                                 "(allowed, refused, invalid, error, unchecked) and kind", ["outcome", "kind"],
                                 registry=r)
        self.latency = Histogram(f"{PREFIX}_decision_seconds", "Time to answer an AdmissionReview, by kind",
                                 ["kind"], buckets=LATENCY_BUCKETS, registry=r)
        self.watch_lag = Histogram(f"{PREFIX}_watch_lag_seconds", "Time from an object's last write "
                                   "(managedFields, second resolution) to its watch event here, by kind",
                                   ["kind"], buckets=LAG_BUCKETS, registry=r)
        self.watch_progress_age = Gauge(f"{PREFIX}_watch_progress_age_seconds", "Seconds since the watch of a "
                                        "kind last proved it was current (a bookmark or a list): how far behind "
                                        "the cache may be; over the cache's lag bound it is not ready", ["kind"],
                                        registry=r)
        self.reservation_lag = Histogram(f"{PREFIX}_reservation_to_watch_seconds", "Time from admitting a "
                                         "growing write (its ledger entry) to this replica's watch seeing it",
                                         buckets=LAG_BUCKETS, registry=r)
        self.cache_objects = Gauge(f"{PREFIX}_cache_objects", "Objects in the cache, by kind", ["kind"],
                                   registry=r)
        self.unreadable = Gauge(f"{PREFIX}_cache_unreadable_objects", "Cached objects the rules cannot read "
                                "(the checked writes decided in their pools are refused while they are there)", registry=r)
        self.watch_restarts = Counter(f"{PREFIX}_watch_restarts", "Watches restarted, by kind and reason "
                                      "(gone: relisted after 410; timeout; error)", ["kind", "reason"], registry=r)
        self.unauthenticated = Counter(f"{PREFIX}_unauthenticated_requests", "POSTs refused because the caller "
                                       "presented no client certificate (with --client-ca)", registry=r)
        self.ready = Gauge(f"{PREFIX}_ready", "1 once every first list has synced", registry=r)
        self.ledger_conflicts = Counter(f"{PREFIX}_ledger_conflicts", "Ledger writes refused with 409 Conflict "
                                        "(re-read and re-checked)", registry=r)
        self.ledger_writes = Counter(f"{PREFIX}_ledger_writes", "Reservations written to the ledger", registry=r)
        self.ledger_entries = Gauge(f"{PREFIX}_ledger_entries", "Live entries in the ledger at the last read",
                                    registry=r)
        self.ledger_seconds = Histogram(f"{PREFIX}_ledger_seconds", "Time of one ledger read or write",
                                        ["operation"], buckets=LATENCY_BUCKETS, registry=r)
        self.certificate_not_after = Gauge(f"{PREFIX}_certificate_not_after_timestamp_seconds", "When a "
                                           "certificate loaded by this replica expires (Unix time), by certificate "
                                           "(serving: its serving certificate; client_ca: the CA its callers' "
                                           "certificates are checked against)", ["certificate"], registry=r)
        self.registrations = Counter(f"{PREFIX}_registrations", "Passes registering the webhook configurations "
                                     "from the chart's ConfigMap (made while ready), by outcome (ok, error)",
                                     ["outcome"], registry=r)

    def certificates_loaded(self, cert_file: str, client_ca: str | None = None) -> None:
        """Set the notAfter of the serving certificate and the callers' CA,
        from the files just loaded (the first certificate of each)."""
        for name, path in (("serving", cert_file), ("client_ca", client_ca)):
            if path is None:
                continue
            expiry = not_after(path)
            if expiry is not None:
                self.certificate_not_after.labels(name).set(expiry)


def not_after(path: str) -> float | None:
    """The notAfter (Unix time) of the first certificate in PEM file `path`,
    read by the ssl module's own decoder (the one its test suite uses; no
    X.509 library is a dependency of the image); None when it cannot be read."""
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # noqa: SLF001 - the stdlib's only file decoder
        return float(ssl.cert_time_to_seconds(decoded["notAfter"]))
    except (AttributeError, KeyError, OSError, ValueError, ssl.SSLError) as err:
        log.warning("cannot read the expiry of %s: %s", path, err)
        return None
