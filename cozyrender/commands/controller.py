"""`cozyrender controller`: the GPU offer's controllers, one leader across
replicas.

    cozyrender controller [--kubeconfig FILE] [--context NAME] [--namespace cozyrender-system]
        [--lease-name NAME] [--identity NAME] [--listen 0.0.0.0:8080]
        [--controllers status,licenses,metrics,gpubudgets] [--lease-duration 15 --renew-deadline 10 --retry-period 2]
        [--ready-contact 30]

A command of its own, not a flag of `webhook`: it runs as its own Deployment
under its own service account (it writes GPUClass status and copies license
Secrets, rights the webhook must not hold), serves plain-HTTP metrics with no
serving certificate, and a controller that crashes or is restarted never
takes an admission replica with it. Serves until SIGTERM or SIGINT (then
releases the Lease); exits 1 when it loses the Lease, so its Deployment
restarts it as a standby. /readyz fails while the API server's last answer
is older than --ready-contact; /healthz when the election loop is stuck.
A thin shell over `cozyrender.controllers`.
"""

from __future__ import annotations

import os
import signal
import socket
import threading

import click

from cozyrender.commands import examples, fail, read_kubeconfig
from cozyrender.commands.webhook import DEFAULT_NAMESPACE, Seconds, _address

CONTROLLERS = ("status", "licenses", "metrics", "gpubudgets")


def _controllers(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in CONTROLLERS]
    if unknown or not names:
        fail(f"--controllers {value!r}: expected a comma-separated list of {', '.join(CONTROLLERS)}")
    return names


@click.command("controller", context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples(
    "cozyrender controller --namespace cozyrender-system",
    "cozyrender controller --kubeconfig ~/.kube/config --listen 127.0.0.1:8080 --controllers status"))
@click.option("--kubeconfig", metavar="FILE", help="Kubeconfig to reach the cluster (default: in-cluster, then "
              "$KUBECONFIG or ~/.kube/config).")
@click.option("--context", metavar="NAME", help="The kubeconfig context to use.")
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="Where the Lease is.")
@click.option("--lease-name", default="cozyrender-controller", show_default=True, metavar="NAME",
              help="The coordination.k8s.io Lease the replicas elect a leader on.")
@click.option("--identity", metavar="NAME", help="This replica's name in the Lease (default: $POD_NAME, else the "
              "host name and process id).")
@click.option("--listen", default="0.0.0.0:8080", show_default=True, metavar="HOST:PORT",
              help="Address to serve /metrics, /healthz and /readyz on (plain HTTP).")
@click.option("--controllers", "names", default=",".join(CONTROLLERS), show_default=True,
              help="Which controllers the leader runs.")
@click.option("--lease-duration", type=Seconds(2, 300), default=15, show_default=True, metavar="SECONDS",
              help="How long a standby waits on an unrenewed Lease before taking it (client-go's default).")
@click.option("--renew-deadline", type=Seconds(1, 299), default=10, show_default=True, metavar="SECONDS",
              help="How long the leader keeps leading without a renewal.")
@click.option("--retry-period", type=Seconds(0.2, 60), default=2, show_default=True, metavar="SECONDS",
              help="How often candidates try and the leader renews.")
@click.option("--ready-contact", type=Seconds(1, 600), default=30, show_default=True, metavar="SECONDS",
              help="Ready while the API server's last answer is at most this old (not Ready when it cannot be "
              "reached).")
@click.option("--platform-vgpu", type=click.Choice(["true", "false"]),
              help="The platform's gpu.vgpu for the metrics' and the GPUBudgets' tree, overriding what the cluster says.")
def command(kubeconfig: str | None, context: str | None, namespace: str, lease_name: str, identity: str | None,
            listen: str, names: str, lease_duration: float, renew_deadline: float, retry_period: float,
            ready_contact: float, platform_vgpu: str | None) -> None:
    """Run the GPU offer's controllers: GPUClass status, vGPU license copies,
    billing metrics and the tenants' GPUBudgets, with leader election across replicas."""
    from cozyrender.controllers import registry
    from cozyrender.controllers.manager import Manager, serve_http
    from cozyrender.kube.client import ClientError, make_client

    chosen = _controllers(names)
    address = _address(listen)
    if not lease_duration > renew_deadline > retry_period:
        fail(f"--lease-duration ({lease_duration:g}) > --renew-deadline ({renew_deadline:g}) > --retry-period "
             f"({retry_period:g}) is required")
    if not ready_contact > retry_period:
        fail(f"--ready-contact ({ready_contact:g}) > --retry-period ({retry_period:g}) is required: the replica "
             "asks the API server every retry period")
    if kubeconfig:
        read_kubeconfig(kubeconfig)
    try:
        make_client(kubeconfig, context)
    except ClientError as err:
        fail(str(err))

    def client():
        return make_client(kubeconfig, context)

    identity = identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"
    override = None if platform_vgpu is None else platform_vgpu == "true"
    from cozyrender.controllers.lease import Fenced

    holds = {"now": lambda: False}  # the elector's, once it exists

    def fenced():  # the controllers write only while this replica holds the Lease in time (issue 34 item 6)
        return Fenced(client(), lambda: holds["now"]())

    factories, metrics = registry(fenced, chosen, override, renew_deadline)
    manager = Manager(client, {"namespace": namespace, "name": lease_name, "identity": identity,
                               "lease_duration": lease_duration, "renew_deadline": renew_deadline,
                               "retry_period": retry_period, "record": metrics.devices}, factories,
                      ready_contact=ready_contact)
    holds["now"] = manager.elector.holds
    try:
        server = serve_http(address, manager, lambda: metrics.text(manager))
    except OSError as err:
        fail(f"cannot listen on {listen}: {err.strerror or err}")
    stopping = threading.Event()

    def stop(signum, frame) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    manager.start()
    click.echo(f"cozyrender controller: {identity} serving http://{listen}/metrics, campaigning for "
               f"{namespace}/{lease_name}", err=True)
    while not stopping.wait(0.2):
        if manager.lost.is_set():
            break
    lost = manager.lost.is_set() and not stopping.is_set()
    manager.stop()
    server.shutdown()
    if lost:
        fail(f"lost the lease {namespace}/{lease_name}; exiting so a new standby starts", exit_code=1)
