"""`cozyrender webhook`: the GPU budget rules as a validating admission
webhook, race-safe across replicas.

    cozyrender webhook --listen 127.0.0.1:8443 --tls-cert FILE --tls-key FILE \\
        [--client-ca FILE] [--kubeconfig FILE] [--context NAME] [--namespace cozyrender-system] \\
        [--ledger PREFIX] [--reservation-ttl SECONDS] [--timeout-seconds SECONDS] [--drain-seconds SECONDS] \\
        [--platform-vgpu true|false] \\
        [--flux-injection] [--register CONFIGMAP --register-owner CLUSTERROLE]

Serves until SIGTERM or SIGINT, then stops refusing nothing: `/readyz`
turns 503 at once, every request (in flight or new) is answered for
--drain-seconds more, then the listener closes and the requests being
answered get their answer. A thin shell over `cozyrender.webhook`.
"""

from __future__ import annotations

import math
import os
import signal
import threading

import click

from cozyrender.commands import examples, fail, read_bytes, read_kubeconfig, shown
from cozyrender.oserrors import describe

DEFAULT_NAMESPACE = "cozyrender-system"


class Seconds(click.ParamType):
    """A number of seconds from `low` to `high`, said in these words whatever
    was typed (a number too long for a float is not `inf`, 5000 is not `5000.0`)."""

    name = "seconds"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and self.low <= number <= self.high):
            self.fail(f"{shown(str(value), quoted=True)} is not a number of seconds from {self.low:g} to {self.high:g}",
                      param, ctx)
        return number


def _address(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    # At most five digits before converting: a port of 5,000 digits is refused in these words too.
    if not sep or not port.isdigit() or len(port) > 5 or not 0 <= int(port) <= 65535:
        fail(f"--listen {shown(listen)}: expected HOST:PORT, e.g. 0.0.0.0:8443")
    return host.strip("[]") or "0.0.0.0", int(port)


@click.command("webhook", context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples(
    "cozyrender webhook --listen 0.0.0.0:8443 --tls-cert /tls/tls.crt --tls-key /tls/tls.key",
    "cozyrender webhook --listen 127.0.0.1:8443 --tls-cert tls.crt --tls-key tls.key --kubeconfig ~/.kube/config"))
@click.option("--listen", default="0.0.0.0:8443", show_default=True, metavar="HOST:PORT",
              help="Address to serve HTTPS on.")
@click.option("--tls-cert", required=True, metavar="FILE", help="The serving certificate (PEM).")
@click.option("--tls-key", required=True, metavar="FILE", help="Its private key (PEM).")
@click.option("--client-ca", metavar="FILE", help="Accept admission requests only from clients presenting a "
              "certificate this CA (PEM) signed: the API server, through its AdmissionConfiguration. /healthz, "
              "/readyz and /metrics stay open.")
@click.option("--kubeconfig", metavar="FILE", help="Kubeconfig to reach the cluster (default: in-cluster, then "
              "$KUBECONFIG or ~/.kube/config).")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use.")
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True,
              help="The webhook's namespace, where the ledger's shards (ConfigMaps) are.")
@click.option("--ledger", default="cozyrender-ledger", show_default=True, metavar="PREFIX",
              help="The reservation ledger: one ConfigMap PREFIX-<pool root namespace> per pool root.")
@click.option("--reservation-ttl", type=Seconds(1, 3600), default=60, show_default=True, metavar="SECONDS",
              help="The expiry written in each reservation (1 to 3600). A reservation is released only once "
                   "the watch shows its object stored or the API server shows it never stored, never by age alone.")
@click.option("--timeout-seconds", type=Seconds(1, 30), default=10, show_default=True, metavar="SECONDS",
              help="The webhook configurations' timeoutSeconds (1 to 30): every decision is answered before it, "
                   "with a margin, or refused saying why; nothing is reserved for a request past it.")
@click.option("--drain-seconds", type=Seconds(0, 120), default=5, show_default=True, metavar="SECONDS",
              help="After SIGTERM: not ready at once, answering every request for this long (callers move away "
                   "meanwhile), then stop (0 to 120; the pod's terminationGracePeriodSeconds must cover its "
                   "preStop sleep, this and --timeout-seconds).")
@click.option("--platform-vgpu", type=click.Choice(["true", "false"]),
              help="The platform's gpu.vgpu, overriding what the cluster says.")
@click.option("--flux-injection", is_flag=True,
              help="Also serve /mutate (cozyrender's postRenderers set on Cozystack's tenant HelmReleases) and run "
                   "the loop that keeps them current (needs Flux's HelmRelease CRD).")
@click.option("--register", "register", metavar="CONFIGMAP",
              help="Register the webhook configurations this ConfigMap (in --namespace) holds, only while this "
                   "replica is ready (the chart's `<release>-webhooks`); without it nothing is registered.")
@click.option("--register-owner", metavar="CLUSTERROLE",
              help="The cluster-scoped object that owns what --register registers (the chart's "
                   "`<release>-read` ClusterRole): deleting it (uninstalling) deletes them.")
def command(listen: str, tls_cert: str, tls_key: str, client_ca: str | None, kubeconfig: str | None, context: str | None, namespace: str,
            ledger: str, reservation_ttl: float, timeout_seconds: float, drain_seconds: float,
            platform_vgpu: str | None, flux_injection: bool,
            register: str | None, register_owner: str | None) -> None:
    """Serve the GPU budget rules as a validating admission webhook."""
    import ssl

    from cozyrender.budgets.live import LiveIndex
    from cozyrender.namespaces import ROOT_NAMESPACE
    from cozyrender.kube.client import ClientError, make_client, stored_object
    from cozyrender.webhook.cache import Cache
    from cozyrender.webhook.ledger import Arbiter, ConfigMapShards, LedgerError
    from cozyrender.webhook.metrics import Metrics
    from cozyrender.webhook.server import ReloadingTLS, serve, tls_context

    import logging

    # One line per event on stderr, as the rest of the process writes them (its watches,
    # registration and the Flux loop log what they do at INFO, what fails at WARNING).
    # Libraries (httpx logs every request at INFO) stay at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("cozyrender").setLevel(logging.INFO)
    address = _address(listen)
    if bool(register) != bool(register_owner):
        fail("--register and --register-owner go together (the ConfigMap to register, and the ClusterRole "
             "that owns what is registered)")
    for path in (tls_cert, tls_key, *([client_ca] if client_ca else [])):
        read_bytes(path)  # a missing or unreadable file, in the commands' words
    try:
        tls_context(tls_cert, tls_key)
    except (ssl.SSLError, OSError, ValueError):
        fail(f"cannot use the certificate {tls_cert} and key {tls_key}: not a PEM certificate and its private key")
    try:
        # Loaded again when the files change: a renewed Secret is served without a restart.
        # The pair loaded just above, so only the client CA can fail here.
        tls = ReloadingTLS(tls_cert, tls_key, client_ca)
    except (ssl.SSLError, OSError, ValueError):
        fail(f"--client-ca {client_ca}: not a PEM CA certificate")
    if kubeconfig:
        read_kubeconfig(kubeconfig)
    try:
        ledger_client = make_client(kubeconfig, context, timeout=2.0)
        make_client(kubeconfig, context)  # the watches' clients are made per kind, the same way
    except ClientError as err:
        fail(str(err))

    index, lock, metrics = LiveIndex(), threading.Lock(), Metrics()
    metrics.certificates_loaded(tls_cert, client_ca)
    tls.on_load = lambda: metrics.certificates_loaded(tls_cert, client_ca)
    cache = Cache(lambda: make_client(kubeconfig, context), index, lock, metrics)
    store = ConfigMapShards(ledger_client, namespace, ledger)
    arbiter = Arbiter(index, lock, metrics, store, seen=cache.seen, unreadable=lambda: cache.unreadable,
                      ttl=reservation_ttl, platform_vgpu=None if platform_vgpu is None else platform_vgpu == "true",
                      lookup=lambda identity: stored_object(ledger_client, identity), timeout=timeout_seconds,
                      known_since=cache.known_since)
    ledger_state = {"ok": False, "why": "the ledger has not been read yet"}
    stopping = threading.Event()

    def check_ledger() -> None:
        while not stopping.is_set() and not ledger_state["ok"]:
            try:
                store.read(ROOT_NAMESPACE)  # absent or not: the shards can be read
                ledger_state.update(ok=True, why="")
            except LedgerError as err:
                ledger_state["why"] = str(err)
            except Exception as err:
                ledger_state["why"] = f"cannot read the ledger: {type(err).__name__}: {err}"
            stopping.wait(2)

    def ready() -> bool:
        return ledger_state["ok"] and cache.ready()

    def not_ready_reason() -> str:
        return "; ".join(part for part in (cache.not_ready_reason(), ledger_state["why"]) if part)

    from cozyrender.budgets.license_volumes import license_patch
    from cozyrender.webhook.mutate import licenses

    def license_volumes(vmi) -> list[dict]:
        with lock:
            return license_patch(index.state, vmi)

    # /mutate-licenses: a licensed vGPU VMI gets its license copy as a labelled disk (the contract).
    routes = {"/validate": arbiter, "/mutate-licenses": lambda review: licenses(review, license_volumes)}
    if flux_injection:
        from cozyrender.flux import controller
        from cozyrender.resources import data_path
        from cozyrender.webhook.mutate import mutate

        from cozyrender.flux.metrics import FluxMetrics, mutation_outcome

        chart = data_path("tenant")
        reader = controller.Reader(ledger_client)
        flux_metrics = FluxMetrics(metrics.registry)

        def mutate_route(review):
            answer = mutate(review, reader.parent_state, chart)
            flux_metrics.mutations.labels(mutation_outcome(answer)).inc()
            return answer

        routes["/mutate"] = mutate_route
    try:
        server = serve(address, tls, routes, ready, metrics, not_ready_reason, timeout=timeout_seconds)
    except OSError as err:
        fail(f"cannot listen on {listen}: {describe(err)}")
    cache.start()
    registrar = None
    if register:
        from cozyrender.webhook.registration import Registrar, ca_bundle_file

        def gpu_device_classes() -> list[str]:
            with lock:  # the DeviceClasses the GPUClasses name: the DRA webhooks are sent claims of these
                return sorted(index.state.class_device_classes)

        # `ca.crt` beside the serving certificate (cert-manager's Secret holds the CA that signed
        # it there), read at each registration pass: a renewed Secret is followed.
        registrar = Registrar(ledger_client, namespace, register, register_owner, routes, ready,
                              ca_bundle=ca_bundle_file(os.path.join(os.path.dirname(tls_cert), "ca.crt")),
                              metrics=metrics, device_classes=gpu_device_classes)
        registrar.start(stopping)
    if flux_injection:
        # With --register, the loop writes only while the chart lists the postrenderers webhook
        # (`--set fluxInjection=false` pauses it at once, before the replicas roll).
        enabled = (lambda: "postrenderers.cozyrender.io" in registrar.webhooks) if registrar else (lambda: True)
        _, stop_controller, _ = controller.start(make_client(kubeconfig, context), chart, metrics=flux_metrics,
                                                 enabled=enabled)
        stopping_hooks = [stop_controller]
    else:
        stopping_hooks = []
    threading.Thread(target=check_ledger, name="ledger-check", daemon=True).start()

    def stop(signum, frame) -> None:
        if server.draining:
            return
        click.echo(f"cozyrender webhook: stopping: not ready, answering for {drain_seconds:g} s more", err=True)
        server.stop_after(drain_seconds)  # the registration, the ledger check and the Flux loop run on meanwhile

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    served = {"/validate": "GPU budgets", "/mutate-licenses": "vGPU license volumes", "/mutate": "Flux injection"}
    click.echo(f"cozyrender webhook: serving https://{listen}: "
               + ", ".join(f"{path} ({served[path]})" for path in routes) + ", /healthz, /readyz, /metrics; "
               + (f"registering the configurations of ConfigMap {namespace}/{register} while ready"
                  if register else "registering no webhook configuration"), err=True)
    try:
        server.serve_forever()
    finally:
        stopping.set()
        for hook in stopping_hooks:
            hook.set()
        # The listener closes, idle connections are closed now (not by the process's exit),
        # and the requests being answered get their answers.
        server.close_gracefully(timeout_seconds)
        cache.stop()

