"""A real Kubernetes control plane on loopback, for the tests and `make cluster`.

Starts, each as its own process group, with every port on 127.0.0.1:
- etcd (built from go.etcd.io/etcd/server/v3) and kube-apiserver v1.35.4
  (built from k8s.io/kubernetes), client-certificate authentication, RBAC;
- kube-controller-manager v1.35.4 with the namespace, garbage-collector and
  ClusterRole aggregation controllers (a deleted namespace is emptied and
  goes; owned objects follow their owner; Cozystack's aggregated tenant roles
  get their rules). No kubelet, scheduler or kube-proxy: pods never run;
- the GPUClass CRD and stand-in CRDs for Cozystack's apps.cozystack.io kinds;
- the namespaces `cozy-system`, `cozyrender-system` and `tenant-root` (or those given);
- N replicas of `cozyrender webhook` behind a round-robin balancer (the
  Service hop), with the webhook chart's RBAC, ledger and ConfigMap of
  webhook configurations applied from `helm template charts/cozyrender-webhook`,
  the replicas authenticating as the chart's service account and registering
  the configurations themselves once ready, as in a real install;
- only the API server may call them (issue 28 item 4): kube-apiserver's
  AdmissionConfiguration gives it a kubeconfig presenting a client
  certificate from a CA of the webhook's own (`pki/webhook-callers/`), and
  the replicas run with `--client-ca` of that CA;
- with `aggapi` (and a node), apps.cozystack.io served as on Cozystack by an
  aggregated API server in a pod, cozyrender's stand-in for cozystack-api
  (aggapi.py, tools/aggapi), presenting its own certificate of that CA,
  instead of by the stand-in CRDs;
- with `registry` (and a node), a private registry on loopback (registry.py): the image of
  `make image` and the webhook chart pushed to it, the node's containerd pulling the image by
  digest with the chart's imagePullSecrets, the chart installed from `oci://` (`make cluster`).

    python tools/controlplane/cluster.py up [--dir .cache/cluster] [--webhook-replicas 2] [--node [--aggapi] [--nodes 2] [--registry]]
    python tools/controlplane/cluster.py down [--dir .cache/cluster]

`up` returns once everything answers ready and leaves the processes running;
their ids are in `<dir>/state.json`, which `down` reads. The admin kubeconfig
is `<dir>/kubeconfig`. From Python, `ControlPlane(dir).start()` /
`.stop()` do the same (the tests' fixture).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from common import ClusterError, client_kubeconfig, free_port  # noqa: E402
from pki import CA, service_account_keys  # noqa: E402

DEFAULT_BIN = REPO / ".cache" / "bin"
WEBHOOK_NAMESPACE = "cozyrender-system"
WEBHOOK_ACCOUNT = "cozyrender-webhook"
WEBHOOK_RELEASE = "cozyrender-webhook"
WEBHOOK_CONFIGURATIONS = f"{WEBHOOK_RELEASE}-webhooks"  # the chart's ConfigMap the replicas register from
GPUCLASS_CRD = REPO / "charts" / "cozystack-basics" / "crds" / "gpuclasses.cozystack.io.yaml"
APPS_STANDIN_CRDS = HERE / "crds" / "apps-cozystack-io-standins.yaml"  # not with the aggregated server
# KubeVirt's VirtualMachine and VirtualMachineInstance, generated from its OpenAPI by
# tools/kubevirt/gen_crds.py (no virt-controller runs here: KubeVirt's modules are not served).
KUBEVIRT_CRDS = HERE / "crds" / "kubevirt-io.yaml"
CRDS = (GPUCLASS_CRD, APPS_STANDIN_CRDS, KUBEVIRT_CRDS)
# Kinds of the webhook chart's output applied here (the Deployment, Service,
# PodDisruptionBudget and certificates are the cluster's job: no kubelet here).
CHART_KINDS_APPLIED = frozenset({
    "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
})


class ControlPlane:
    def __init__(self, directory: Path, bin_dir: Path = DEFAULT_BIN, webhook_replicas: int = 2,
                 webhook_args: tuple[str, ...] = (),
                 namespaces: tuple[str, ...] = ("cozy-system", WEBHOOK_NAMESPACE, "tenant-root"),
                 flux: bool = False, flux_injection: bool | None = None,
                 node: bool = False, gpus: dict[str, int] | None = None, aggapi: bool = False,
                 dra_gpus: int = 0, nodes: int = 1, registry: bool = False, network_policy: bool = False) -> None:
        self.dir = Path(directory).resolve()
        self.bin = Path(bin_dir).resolve()
        self.webhook_replicas = webhook_replicas
        self.webhook_args = tuple(webhook_args)
        self.namespaces = tuple(namespaces)
        self.flux = flux  # helm-controller, the Flux CRDs and the tenant chart's ExternalArtifact (flux.py)
        # the chart's fluxInjection (which configurations the replicas register); default: the replicas' flag
        self.flux_injection = flux_injection
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.kubeconfig = self.dir / "kubeconfig"
        self.webhook_kubeconfig = self.dir / "webhook-kubeconfig"
        self.processes: dict[str, subprocess.Popen] = {}
        self.pids: dict[str, int] = {}
        self.ports: dict[str, int] = {}
        self.server = ""
        # With a node (node.py): kubelet, scheduler, containerd, and the webhook chart installed
        # by Helm from the image instead of the replicas as local processes.
        self.with_node = node
        self.gpus = dict(gpus or {})
        self.dra_gpus = dra_gpus  # devices the node's DRA driver gpu.cozyrender.io publishes (node.py)
        self.node = None
        # With nodes > 1, the extra nodes (node.py: no GPUs, each in a mount namespace of its own)
        # beside the plane's node, started after it.
        self.node_count = nodes
        if nodes > 1 and not node:
            raise ClusterError("extra nodes come with the node: nodes > 1 needs node=True (--node)")
        self.extra_nodes: list = []
        # apps.cozystack.io from the aggregated server in a pod (aggapi.py) instead of stand-in CRDs.
        self.aggapi = aggapi
        # With `registry` (and a node): a private registry on loopback (registry.py); the image and
        # the chart pushed to it, the node pulling the image and Helm installing the chart from it.
        self.with_registry = registry
        if registry and not node:
            raise ClusterError("the registry serves the node: registry=True needs node=True (--node)")
        self.registry = None
        # NetworkPolicy enforced on the node (node.py: kube-network-policies), and the chart's
        # policy of type kubernetes.
        if network_policy and not node:
            raise ClusterError("NetworkPolicy is enforced on the node: network_policy needs node=True (--node)")
        self.network_policy = network_policy
        # The signal a process stops on, where not SIGTERM (its name -> signal number).
        self.stop_signals: dict[str, int] = {}

    # -- processes ------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = open(self.logs / f"{name}.log", "ab")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env, cwd=self.dir)
        log.close()
        self.processes[name] = process
        self.pids[name] = process.pid
        self._save()

    def _save(self) -> None:
        (self.dir / "state.json").write_text(json.dumps(
            {"pids": self.pids, "ports": self.ports, "server": self.server, "stop_signals": self.stop_signals},
            indent=2))

    def _wait(self, what: str, probe, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(f"{name} exited with {process.returncode} while waiting for {what}; "
                                       f"see {self.logs / (name + '.log')}")
            try:
                if probe():
                    return
            except Exception as err:  # noqa: BLE001 - any failure to answer is "not yet"
                last = err
            time.sleep(0.2)
        raise ClusterError(f"{what} not ready after {timeout:.0f} s ({last})")

    def _https_ok(self, url: str, cert: Path | None = None, key: Path | None = None) -> bool:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if cert is not None:
            context.load_cert_chain(str(cert), str(key))
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return response.status == 200

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> ControlPlane:
        for binary in ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm4"):
            if not (self.bin / binary).exists():
                raise ClusterError(f"{self.bin / binary} is missing: run `make controlplane binaries`")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pki.mkdir(exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        try:
            if self.with_node:
                from node import Node

                self.node = Node(self, self.gpus, dra_gpus=self.dra_gpus)
            self._pki()
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._install_crds()
            if self.flux:
                import flux

                flux.start(self)
            if self.with_registry:
                self._start_registry()
            if self.node is not None:
                self.node.start()
                for index in range(1, self.node_count):
                    from node import Node

                    self.extra_nodes.append(Node(self, index=index))
                    self.extra_nodes[-1].start()
            if self.aggapi:
                import aggapi

                aggapi.install(self)
            if self.webhook_replicas and self.node is not None:
                self.node.install_webhook_chart(self.webhook_replicas)
            elif self.webhook_replicas:
                self.start_webhooks()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_registry(self) -> None:
        """The registry, the webhook image (dist/cozyrender-image, `make image`) and the webhook
        chart pushed to it: what the node pulls and Helm installs (node.py)."""
        from registry import Registry

        self.registry = Registry(self).start()
        self.registry.image = self.registry.push_image(REPO / "dist" / "cozyrender-image")
        self.registry.chart = self.registry.push_chart(REPO / "charts" / "cozyrender-webhook", self.node.helm_env())

    def _pki(self) -> None:
        ca = self.ca = CA(self.pki)
        self.ca_pem = ca.pem
        self.apiserver_cert = ca.issue("apiserver", "kube-apiserver",
                                       server_names=("127.0.0.1", "localhost", "kubernetes.default.svc",
                                                     *((self.node.gateway,) if self.node else ())))
        self.admin_cert = ca.issue("admin", "cozyrender-admin", organizations=("system:masters",), client=True)
        self.webhook_client_cert = ca.issue(
            "webhook-client", f"system:serviceaccount:{WEBHOOK_NAMESPACE}:{WEBHOOK_ACCOUNT}",
            organizations=("system:serviceaccounts", f"system:serviceaccounts:{WEBHOOK_NAMESPACE}"), client=True)
        # Its controllers would each use a service account with its own role; one identity with
        # every right is simpler for a test plane.
        self.controller_manager_cert = ca.issue("controller-manager", "system:kube-controller-manager",
                                                organizations=("system:masters",), client=True)
        self.webhook_serving_cert = ca.issue("webhook", "cozyrender-webhook", server_names=("127.0.0.1", "localhost"))
        self._admission_pki()
        if self.aggapi:
            import aggapi

            if not self.with_node:
                raise ClusterError("the apps.cozystack.io aggregated server runs as a pod: it needs the node")
            aggapi.front_proxy_pki(self)
        self.sa_key, self.sa_pub = service_account_keys(self.pki)

    def _admission_pki(self) -> None:
        """The CA the webhook checks its callers against (its own, not the
        cluster's client CA, which signs every user's certificate), the
        client certificate kube-apiserver presents with it, and the
        AdmissionConfiguration handing the API server that certificate for
        every webhook (`*`: the test plane's webhooks are all cozyrender's)."""
        callers = self.pki / "webhook-callers"
        callers.mkdir(exist_ok=True)
        caller_ca = self.webhook_caller_ca = CA(callers)
        self.webhook_client_ca = caller_ca.cert_path
        cert, key = caller_ca.issue("kube-apiserver", "kube-apiserver", client=True)
        kubeconfig = callers / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "users": [{"name": "*", "user": {"client-certificate": str(cert), "client-key": str(key)}}]}))
        webhook = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
                   "kubeConfigFile": str(kubeconfig)}
        self.admission_config = self.dir / "admission-config.yaml"
        self.admission_config.write_text(yaml.safe_dump({
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [{"name": name, "configuration": webhook}
                        for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}))

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.ports.update(etcd=client, etcd_peer=peer)
        self._spawn("etcd", [
            str(self.bin / "etcd"), "--name", "default", "--data-dir", str(self.dir / "etcd-data"),
            "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer}", "--log-level", "warn",
            # Test data only: a lost write on power loss does not matter here, and fsync on a shared
            # CI disk would dominate every test's time.
            "--unsafe-no-fsync",
        ])
        self._wait("etcd", lambda: urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=2).status == 200, 30)

    def _start_apiserver(self) -> None:
        port = free_port()
        self.ports["apiserver"] = port
        self.server = f"https://127.0.0.1:{port}"
        cert, key = self.apiserver_cert
        self._spawn("kube-apiserver", [
            str(self.bin / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.pki / 'ca.crt'}",
            f"--service-account-key-file={self.sa_pub}", f"--service-account-signing-key-file={self.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            f"--admission-control-config-file={self.admission_config}",
            # No kubelet or kube-proxy here: the `kubernetes` Service's endpoints would be a loopback
            # address, which the API refuses.
            "--endpoint-reconciler-type=none",
            # Service-mode webhooks (and aggregated APIs) are called at their endpoints' addresses,
            # never at a ClusterIP or a DNS name: nothing here may resolve a name off this machine.
            # A Service with no ready endpoint is refused ("no endpoints available").
            "--enable-aggregator-routing=true",
            *(self.node.apiserver_args() if self.node else ()),
            *self._aggregator_args(),
            f"--cert-dir={self.pki}", "--profiling=false", "--v=1",
        ])
        kubeconfig = client_kubeconfig(self.server, self.pki / "ca.crt", *self.admin_cert, "admin")
        self.kubeconfig.write_text(yaml.safe_dump(kubeconfig))
        self.webhook_kubeconfig.write_text(yaml.safe_dump(
            client_kubeconfig(self.server, self.pki / "ca.crt", *self.webhook_client_cert, WEBHOOK_ACCOUNT)))
        self._save()
        self._wait("kube-apiserver", lambda: self._https_ok(f"{self.server}/readyz", *self.admin_cert), 90)

    def _aggregator_args(self) -> list[str]:
        """kube-apiserver's front-proxy flags, with the aggregated server (aggapi.py)."""
        if not self.aggapi:
            return []
        import aggapi

        return aggapi.apiserver_args(self)

    def _start_controller_manager(self) -> None:
        kubeconfig = self.dir / "controller-manager-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(client_kubeconfig(
            self.server, self.pki / "ca.crt", *self.controller_manager_cert, "system:kube-controller-manager")))
        self._spawn("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--controllers=" + ",".join(("namespace-controller", "garbage-collector-controller",
                                         "clusterrole-aggregation-controller",
                                         *(self.node.controllers() if self.node else ()))),
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--cert-dir={self.pki / 'controller-manager'}", "--v=1",
        ])

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess:
        result = subprocess.run([str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                                input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            message = result.stderr.strip() or result.stdout.strip()
            raise ClusterError(f"kubectl {' '.join(args)}: {message[:2000]}")
        return result

    def wait_crds_established(self, timeout: float = 60) -> None:
        """Every CRD Established (a CRD just created may not have conditions yet)."""
        def established() -> bool:
            crds = json.loads(self.kubectl("get", "crd", "-o", "json").stdout)["items"]
            return all(any(c.get("type") == "Established" and c.get("status") == "True"
                           for c in (crd.get("status") or {}).get("conditions") or []) for crd in crds)
        self._wait("CRDs Established", established, timeout)

    def _install_crds(self) -> None:
        for crd in (GPUCLASS_CRD, KUBEVIRT_CRDS) if self.aggapi else CRDS:
            self.kubectl("apply", "--server-side", "-f", str(crd))
        self.wait_crds_established()
        for namespace in self.namespaces:
            self.kubectl("create", "namespace", namespace)
        # The API server serves new CRD kinds shortly after Established: wait until discovery has them.
        self._wait("kubevirt.io discovery",
                   lambda: "virtualmachineinstances" in self.kubectl("api-resources", "--api-group=kubevirt.io",
                                                                     check=False).stdout, 30)
        if self.aggapi:
            return  # apps.cozystack.io is served once the aggregated server's pod runs (aggapi.install)
        self._wait("apps.cozystack.io discovery",
                   lambda: "vminstances" in self.kubectl("api-resources", "--api-group=apps.cozystack.io",
                                                         check=False).stdout, 30)

    # -- the webhook ----------------------------------------------------------

    def webhook_objects(self, url: str) -> list[dict]:
        """The webhook chart's cluster objects, pointed at `url` with this CA."""
        values = {
            "clientConfig": {"url": url, "caBundle": base64.b64encode(self.ca_pem).decode()},
            "fluxInjection": ("--flux-injection" in self.webhook_args if self.flux_injection is None
                              else self.flux_injection),
            "clientAuth": {"caBundle": base64.b64encode(self.webhook_client_ca.read_bytes()).decode()},
        }
        values_file = self.dir / "webhook-values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        rendered = subprocess.run(
            [str(self.bin / "helm4"), "template", "cozyrender-webhook", str(REPO / "charts" / "cozyrender-webhook"),
             "--namespace", WEBHOOK_NAMESPACE, "-f", str(values_file)],
            capture_output=True, text=True, env={**os.environ, "HELM_CACHE_HOME": str(self.dir / "helm"),
                                                 "HELM_CONFIG_HOME": str(self.dir / "helm"),
                                                 "HELM_DATA_HOME": str(self.dir / "helm")})
        if rendered.returncode != 0:
            raise ClusterError(f"helm template charts/cozyrender-webhook: {rendered.stderr.strip()}")
        return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc and doc.get("kind") in CHART_KINDS_APPLIED]

    def start_webhooks(self) -> None:
        replicas = []
        for index in range(self.webhook_replicas):
            port = free_port()
            self.ports[f"webhook-{index}"] = port
            replicas.append(port)
            self.start_webhook(index)
        balancer = free_port()
        self.ports["webhook-balancer"] = balancer
        self._spawn("webhook-balancer", [
            sys.executable, str(HERE / "balancer.py"), "--listen", f"127.0.0.1:{balancer}",
            *[arg for port in replicas for arg in ("--backend", f"127.0.0.1:{port}")],
        ])
        objects = self.webhook_objects(f"https://127.0.0.1:{balancer}/validate")
        # RBAC, the ledger and the ConfigMap of webhook configurations, which the replicas
        # register themselves once ready (cozyrender.webhook.registration).
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        source = next(obj for obj in objects if obj["metadata"]["name"] == WEBHOOK_CONFIGURATIONS)
        self.webhook_configurations = [doc for key in sorted(source["data"])
                                       for doc in yaml.safe_load_all(source["data"][key]) if doc]
        for index in range(self.webhook_replicas):
            self.wait_webhook(index)
        for obj in self.webhook_configurations:
            self._wait(f"{obj['kind']} {obj['metadata']['name']} registered by a replica",
                       lambda obj=obj: self.kubectl("get", obj["kind"].lower(), obj["metadata"]["name"],
                                                    check=False).returncode == 0, 60)

    def start_webhook(self, index: int) -> None:
        cert, key = self.webhook_serving_cert
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._spawn(f"webhook-{index}", [
            sys.executable, "-m", "cozyrender", "webhook", "--listen", f"127.0.0.1:{self.ports[f'webhook-{index}']}",
            "--tls-cert", str(cert), "--tls-key", str(key), "--kubeconfig", str(self.webhook_kubeconfig),
            "--namespace", WEBHOOK_NAMESPACE, "--client-ca", str(self.webhook_client_ca), "--register", WEBHOOK_CONFIGURATIONS,
            "--register-owner", f"{WEBHOOK_RELEASE}-read", *self.webhook_args,
        ], env=env)

    def wait_webhook(self, index: int, timeout: float = 60) -> None:
        port = self.ports[f"webhook-{index}"]
        self._wait(f"webhook replica {index}", lambda: self._https_ok(f"https://127.0.0.1:{port}/readyz"), timeout)

    def stop_process(self, name: str, timeout: float = 10) -> None:
        pid = self.pids.pop(name, None)
        process = self.processes.pop(name, None)
        if pid is not None:
            _terminate(pid, timeout, process, self.stop_signals.get(name, signal.SIGTERM))
        if process is not None:
            process.wait()
        self._save()

    def stop(self) -> None:
        # Webhooks first (nothing calls them once the API server is gone), then its other clients,
        # the API server, etcd last. With a client still connected kube-apiserver does not finish
        # its graceful shutdown and is killed at stop_process's timeout (10 s); without, it takes 1 s.
        order = sorted(self.pids, key=lambda name: ("webhook" not in name, name == "etcd", name == "kube-apiserver"))
        for name in order:
            self.stop_process(name)
        if self.with_node:
            from node import cleanup

            cleanup(self.dir)


def _terminate(pid: int, timeout: float, process: subprocess.Popen | None = None,
               sig: int = signal.SIGTERM) -> None:
    """SIGTERM (or `sig`) to the process group, SIGKILL after `timeout`. Our own child is reaped as it exits
    (`process.poll()`): unreaped, its zombie stays in the group and the group never looks gone,
    which made every stop wait its whole timeout (10 s a process, a minute a plane)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None:
            process.poll()
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def down(directory: Path) -> None:
    state_file = Path(directory) / "state.json"
    if not state_file.exists():
        return
    state = json.loads(state_file.read_text())
    pids, stop_signals = state.get("pids", {}), state.get("stop_signals", {})
    for name in sorted(pids, key=lambda name: ("webhook" not in name, name == "etcd")):
        _terminate(pids[name], 10, sig=stop_signals.get(name, signal.SIGTERM))
    state_file.unlink()
    from node import cleanup

    cleanup(Path(directory))


def set_injection(directory: Path, on: bool) -> int:
    """`helm upgrade --set fluxInjection=true|false` for the cluster's chart objects: the
    ConfigMap of configurations re-rendered and applied; the replicas register the
    MutatingWebhookConfiguration with or without its postrenderers webhook and run or pause
    the loop accordingly."""
    state = json.loads((Path(directory) / "state.json").read_text())
    plane = ControlPlane(directory, flux_injection=on)
    if (Path(directory) / "node").is_dir():  # the chart installed by Helm on the node: upgrade it
        home = plane.dir / "helm"
        subprocess.run([str(plane.bin / "helm4"), "upgrade", WEBHOOK_RELEASE, str(REPO / "charts" / "cozyrender-webhook"),
                        "--namespace", WEBHOOK_NAMESPACE, "--reuse-values", "--set", f"fluxInjection={str(on).lower()}",
                        "--wait", "--timeout", "5m", f"--kubeconfig={plane.kubeconfig}"], check=True,
                       env={**os.environ, "HELM_CACHE_HOME": str(home), "HELM_CONFIG_HOME": str(home),
                            "HELM_DATA_HOME": str(home)})
        print(f"cluster: Flux injection {'on' if on else 'off'}")
        return 0
    plane.server, plane.ports = state["server"], state["ports"]
    plane.ca_pem = (plane.pki / "ca.crt").read_bytes()
    plane.webhook_client_ca = plane.pki / "webhook-callers" / "ca.crt"  # written by `up` (_admission_pki)
    objects = plane.webhook_objects(f"https://127.0.0.1:{plane.ports['webhook-balancer']}/validate")
    # Everything the chart changes with the value: the ConfigMap of configurations and the RBAC
    # injection needs (tenant values Secrets, HelmReleases).
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    def present() -> bool:  # the postrenderers webhook in the MutatingWebhookConfiguration (beside the licenses one)
        found = plane.kubectl("get", "mutatingwebhookconfiguration", WEBHOOK_RELEASE, "-o", "json", check=False)
        return found.returncode == 0 and any(hook.get("name") == "postrenderers.cozyrender.io"
                                             for hook in json.loads(found.stdout).get("webhooks") or [])

    plane._wait(f"the replicas {'registering' if on else 'removing'} the postrenderers webhook",
                lambda: present() is on, 60)
    print(f"cluster: Flux injection {'on' if on else 'off'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description="The test control plane on loopback.")
    parser.add_argument("action", choices=("up", "down", "injection-on", "injection-off"))
    parser.add_argument("--dir", default=str(REPO / ".cache" / "cluster"))
    parser.add_argument("--bin", default=str(DEFAULT_BIN))
    parser.add_argument("--webhook-replicas", type=int, default=2)
    parser.add_argument("--flux", action="store_true",
                        help="also helm-controller, the Flux CRDs and the tenant chart as its ExternalArtifact; the "
                             "replicas serve Flux injection, registered once `injection on` says so")
    parser.add_argument("--node", action="store_true",
                        help="a node (containerd, kubelet, scheduler) and the webhook chart installed from the image")
    parser.add_argument("--gpu", action="append", default=[], metavar="NAME=COUNT",
                        help="with --node: a GPU resource the device plugin advertises (repeatable)")
    parser.add_argument("--dra-gpus", type=int, default=0, metavar="N",
                        help="with --node: the DRA driver gpu.cozyrender.io publishing N devices, and its DeviceClass")
    parser.add_argument("--nodes", type=int, default=1, metavar="N",
                        help="with --node: N nodes, the extra ones without GPUs (node.py)")
    parser.add_argument("--network-policy", action="store_true",
                        help="with --node: NetworkPolicy enforced on the node (kube-network-policies) and the "
                             "chart installed with networkPolicy.type kubernetes")
    parser.add_argument("--aggapi", action="store_true",
                        help="with --node: apps.cozystack.io served by the aggregated API server in a pod "
                             "(tools/aggapi, cozystack-api's stand-in) instead of stand-in CRDs")
    parser.add_argument("--registry", action="store_true",
                        help="with --node: a private registry on loopback (TLS, basic auth); the image and the chart "
                             "pushed to it, the node pulling the image by digest, the chart installed from oci://")
    args = parser.parse_args(argv)
    gpus = {}
    for spec in args.gpu:
        name, _, count = spec.partition("=")
        if not count.isdigit():
            parser.error(f"--gpu {spec!r}: want NAME=COUNT")
        gpus[name] = int(count)
    directory = Path(args.dir)
    if args.action in ("injection-on", "injection-off"):
        return set_injection(directory, args.action == "injection-on")
    if args.action == "down":
        down(directory)
        print(f"cluster: stopped ({directory})")
        return 0
    down(directory)  # a cluster left running from an earlier `up`
    if directory.exists():
        import shutil

        shutil.rmtree(directory)
    try:
        plane = ControlPlane(directory, Path(args.bin), args.webhook_replicas, flux=args.flux,
                             webhook_args=("--flux-injection",) if args.flux else (),
                             flux_injection=False if args.flux else None, node=args.node, gpus=gpus,
                             aggapi=args.aggapi, dra_gpus=args.dra_gpus, nodes=args.nodes,
                             registry=args.registry, network_policy=args.network_policy).start()
    except (ClusterError, RuntimeError) as err:
        print(f"cluster: error: {err}", file=sys.stderr)
        return 1
    where = (", ".join(f"pods on node {n.name} {n.bridge} {n.gateway}/24" for n in (plane.node, *plane.extra_nodes))
             if plane.node else "local processes")
    print(f"cluster: kube-apiserver {plane.server}, {args.webhook_replicas} webhook replica(s) ({where})")
    if plane.aggapi:
        print("cluster: apps.cozystack.io served by the aggregated API server cozy-system/cozystack-api (tools/aggapi)")
    if plane.registry is not None:
        print(f"cluster: registry {plane.registry.host} (CA {plane.registry.ca}): image {plane.registry.image[0]}@"
              f"{plane.registry.image[1]}, chart {plane.registry.chart[0]} {plane.registry.chart[1]}")
    print(f"cluster: export KUBECONFIG={plane.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
