"""The webhook serves a renewed certificate without a restart (cozyrender.webhook.server's
ReloadingTLS), over real TLS: the files swapped the way the kubelet swaps a Secret volume's
(a rename), a connection made after is served the new certificate, verified against the new
CA only; files that do not load yet (a key that does not match) leave the old one served."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import threading

from webhook_certs import make_certs

from cozyrender.webhook.metrics import Metrics
from cozyrender.webhook.server import ReloadingTLS, serve


def served(port: int, ca: os.PathLike) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def swap(source: os.PathLike, target: os.PathLike) -> None:
    """Replace `target` by renaming a copy over it: a new inode, as a Secret volume update gives."""
    staged = f"{target}.new"
    shutil.copyfile(source, staged)
    os.replace(staged, target)


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path):
    live, first, second = (tmp_path / name for name in ("live", "first", "second"))
    for folder in (live, first, second):
        folder.mkdir()
    old, new = make_certs(first), make_certs(second)
    for name in ("cert", "key"):
        shutil.copyfile(old[name], live / old[name].name)
    tls = ReloadingTLS(str(live / "tls.crt"), str(live / "tls.key"), interval=0)
    server = serve(("127.0.0.1", 0), tls, {"/validate": lambda body: {}}, threading.Event().is_set, Metrics())
    server.serve_in_thread()
    try:
        before = served(server.port, old["ca"])
        # A key that does not match the certificate (the key swapped first): not loaded, the
        # old pair is still served and verifies against the old CA.
        swap(new["key"], live / "tls.key")
        assert served(server.port, old["ca"]) == before and tls.reloads == 0
        swap(new["cert"], live / "tls.crt")
        after = served(server.port, new["ca"])
        assert after != before and tls.reloads == 1
        try:
            served(server.port, old["ca"])
        except ssl.SSLCertVerificationError:
            pass
        else:
            raise AssertionError("the old CA still verifies what is served")
    finally:
        server.shutdown()
        server.server_close()


def test_unchanged_files_are_checked_at_most_every_interval(tmp_path):
    files = make_certs(tmp_path)
    now = [0.0]
    tls = ReloadingTLS(str(files["cert"]), str(files["key"]), interval=5, clock=lambda: now[0])
    context = tls.current()
    (tmp_path / "other").mkdir()
    other = make_certs(tmp_path / "other")
    swap(other["cert"], files["cert"])
    swap(other["key"], files["key"])
    now[0] = 4.9
    assert tls.current() is context  # not looked at yet
    now[0] = 5.0
    assert tls.current() is not context and tls.reloads == 1
