"""The webhook exports when its certificates expire
(`cozyrender_webhook_certificate_not_after_timestamp_seconds{certificate}`,
cozyrender.webhook.metrics): the serving certificate's and the callers' CA's
notAfter, read from the files the replica loads, equal to what
`cryptography` reads from the same files, and set again when a renewed
certificate is loaded (ReloadingTLS's on_load), as the expiry alerts need."""

from __future__ import annotations

import os
import shutil

from cryptography import x509
from webhook_certs import make_certs, make_client_ca

from cozyrender.webhook.metrics import Metrics, not_after
from cozyrender.webhook.server import ReloadingTLS


def expiry(path: os.PathLike) -> float:
    return x509.load_pem_x509_certificate(open(path, "rb").read()).not_valid_after_utc.timestamp()


def exported(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value("cozyrender_webhook_certificate_not_after_timestamp_seconds",
                                             {"certificate": name})


def test_the_serving_certificate_and_the_callers_ca_expiry_are_exported(tmp_path):
    serving = make_certs(tmp_path)
    callers = make_client_ca(tmp_path, "apiserver")
    metrics = Metrics()
    metrics.certificates_loaded(str(serving["cert"]), str(callers["ca"]))
    assert exported(metrics, "serving") == expiry(serving["cert"])
    assert exported(metrics, "client_ca") == expiry(callers["ca"])
    alone = Metrics()
    alone.certificates_loaded(str(serving["cert"]))
    assert exported(alone, "client_ca") is None  # no --client-ca: no series


def test_a_renewed_certificate_sets_the_expiry_again(tmp_path):
    (tmp_path / "live").mkdir()
    (tmp_path / "renewed").mkdir()
    first = make_certs(tmp_path)
    for name in ("cert", "key"):
        shutil.copyfile(first[name], tmp_path / "live" / first[name].name)
    live = {name: str(tmp_path / "live" / first[name].name) for name in ("cert", "key")}
    now = [0.0]
    tls = ReloadingTLS(live["cert"], live["key"], interval=1, clock=lambda: now[0])
    metrics = Metrics()
    metrics.certificates_loaded(live["cert"])
    tls.on_load = lambda: metrics.certificates_loaded(live["cert"])
    before = exported(metrics, "serving")
    renewed = make_certs(tmp_path / "renewed")  # made later: a later notAfter, to the microsecond at least
    for name in ("cert", "key"):
        staged = f"{live[name]}.new"
        shutil.copyfile(renewed[name], staged)
        os.replace(staged, live[name])
    now[0] = 1.0
    tls.current()
    assert tls.reloads == 1 and exported(metrics, "serving") == expiry(renewed["cert"])
    assert int(expiry(renewed["cert"])) >= int(before)


def test_a_file_that_is_no_certificate_exports_nothing(tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    assert not_after(str(junk)) is None
    metrics = Metrics()
    metrics.certificates_loaded(str(junk))
    assert exported(metrics, "serving") is None
