"""`cozyrender webhook` as a process: bad input is one line on stderr and
exit 2; started against a cluster it cannot reach, it serves `/healthz`,
answers `/readyz` 503 saying why and refuses reviews; SIGTERM stops it
gracefully (exit 0)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from test_budgets_builders import vm
from test_webhook_admission import review
from webhook_certs import make_certs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
from common import free_port  # noqa: E402  (a port reserved for this worker: see its docstring)


def cozyrender(*args: str, **options) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cozyrender", *args], capture_output=True, text=True, env=env,
                          timeout=60, **options)


def kubeconfig(folder: Path, port: int) -> Path:
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.mark.parametrize("args,message", [
    (["--listen", "nowhere", "--tls-cert", "a", "--tls-key", "b"], "--listen nowhere: expected HOST:PORT"),
    (["--tls-cert", "missing.crt", "--tls-key", "missing.key"], "missing.crt: no such file"),
    (["--tls-cert", "{cert}", "--tls-key", "{cert}"], "cannot use the certificate"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--kubeconfig", "nope.yaml"], "nope.yaml: no such file"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--kubeconfig", "{kubeconfig}", "--context", "other"],
     "cannot use the cluster configuration"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    files = make_certs(tmp_path)
    config = kubeconfig(tmp_path, 1)
    args = [a.format(cert=files["cert"], key=files["key"], kubeconfig=config) for a in args]
    proc = cozyrender("webhook", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("cozyrender webhook: error: ") and message in line and "Traceback" not in proc.stderr


def test_unready_it_refuses_and_sigterm_stops_it(tmp_path: Path) -> None:
    files = make_certs(tmp_path)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cozyrender", "webhook", "--listen", f"127.0.0.1:{port}",
                             "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]),
                             "--kubeconfig", str(kubeconfig(tmp_path, free_port()))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    context = ssl.create_default_context(cafile=str(files["ca"]))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
                time.sleep(0.2)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=5)
        assert err.value.code == 503 and b"has not synced" in err.value.read()
        request = urllib.request.Request(f"https://127.0.0.1:{port}/validate", method="POST",
                                         data=json.dumps(review(vm("tenant-a", "v", []), uid="early")).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, context=context, timeout=5).read())
        assert answer["response"]["uid"] == "early" and answer["response"]["allowed"] is False
        assert "not ready" in answer["response"]["status"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, errors = proc.communicate(timeout=20)
    assert proc.returncode == 0, errors
    assert "Traceback" not in errors
