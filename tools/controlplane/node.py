"""A real node for the test control plane: containerd + runc + CNI, kubelet and kube-scheduler.

`Node(plane)` adds, to a `ControlPlane` (cluster.py) started with `node=True`:
- a pod network of its own: a Linux bridge `cozyrN` the run creates with 10.250.N.1/24 on it
  (N chosen free on this machine) and a MAC address of its own that pods coming and going
  never change (`bridge_mac`), Debian's CNI plugins (bridge, host-local IPAM, loopback)
  putting each pod in a network namespace with an address in 10.250.N.0/24, no masquerade, no
  route anywhere else: traffic goes only to loopback and to those pod addresses;
- containerd (Debian's package) with runc, state under the run's folder, its sandbox image and
  every image imported from dist/ (`make image`), never pulled (no registry is configured);
- kubelet v1.35.4 (cgroupfs driver, `failCgroupV1: false`: this machine's cgroups are a v1/v2
  hybrid; cgroups under a root of its own, `/cozyrender-N`), registered as node `cozyrender-node`
  with the bridge address as its InternalIP;
- kube-scheduler v1.35.4;
- the API server for pods, at 10.250.N.1 (a TCP forward to the loopback API server; the
  apiserver's certificate names that address); pods are told it through the
  KUBERNETES_SERVICE_HOST/PORT environment the caller sets (no kube-proxy: Services reach the
  webhook through the API server's `--enable-aggregator-routing`, which calls endpoints);
- optionally (the plane's `network_policy`) NetworkPolicy enforced on the node:
  kube-network-policies v0.8.0 (tools/node/netpol, upstream's command as released), a host process
  beside the kubelet, as upstream's DaemonSet runs it (host network), deciding each new connection
  of the node's pods in user space from an NFQUEUE. Upstream sends packets to that queue with an
  nftables `queue` rule, which this kernel cannot load (CONFIG_NFT_QUEUE is not set: its table's
  batch is refused with ENOENT, logged as "syncing nftables rules" and retried); the node sends
  them there instead with the xtables NFQUEUE target (CONFIG_NETFILTER_XT_TARGET_NFQUEUE, through
  iptables-nft): new connections forwarded into or out of each node's bridge (bridged packets
  reach the IP hooks through br_netfilter, bridge-nf-call-iptables=1). The node's own traffic (kube-apiserver,
  the kubelet's probes) is not forwarded, so never queued, as upstream leaves root's traffic
  alone. No queue bypass: with the enforcer gone, those connections are dropped (fail closed).
  It reads the API with in-cluster configuration only, so it runs in a mount namespace of its own
  with a tmpfs over /run holding its service account's token and the CA at the in-cluster path
  (and no NRI socket: pod addresses come from the API); stopped with SIGINT, its only stop signal.
  One enforcer serves every node of the plane (their bridges share the machine's network
  namespace): it decides a packet by the policies of whichever pods own its two addresses, on any
  node (`--hostname-override` names the plane's node, which only scopes upstream's nftables set);
- optionally the GPU device plugin (tools/node/deviceplugin) registering resource names and
  counts with the kubelet;
- optionally the DRA driver `gpu.cozyrender.io` (tools/node/draplugin), a kubelet plugin
  registered through the kubelet's plugin registration folder (<kubelet root>/plugins_registry)
  with its DRA socket in <kubelet root>/plugins/gpu.cozyrender.io, publishing the node's
  ResourceSlice of N devices (attribute `model`, capacity `memory`), with the DeviceClass
  `gpu.cozyrender.io` selecting its devices by CEL and the RBAC its identity needs. Preparing a
  claim writes a CDI spec file under the node's folder (cdi/) and hands the kubelet its CDI
  device IDs. Debian bookworm's containerd (1.6) has no CDI support (its CRI plugin gained
  `enable_cdi` in 1.7): on such a node runc is called through tools/node/cdi_runc.py, a
  stand-in for that step, which adds the CDI specs' env edits of the pod's prepared claims.

`Node(plane, index=1)` (the plane's `nodes=2`) is a second node, `cozyrender-node-2` in
<plane>/node-2, for what needs somewhere to move pods (a drain): no GPUs (no device plugin, no
DRA driver), its own bridge and subnet, containerd, kubelet (certificates, port, cgroup root),
the first node's scheduler and API server forward (its pods get a route to that address). Its
containerd and kubelet run in a mount namespace of their own (a holder process from `unshare
--mount --propagation slave`, the two started through `nsenter --mount`) with private folders
bind-mounted over the kubelet's machine-wide paths: /var/lib/kubelet/device-plugins (a
kubelet's device manager deletes every socket there on start, the first node's device plugin's
included) and /var/log/pods, /var/log/containers (a kubelet's garbage collection removes the
log folders of pods it does not know). Its mounts go with the namespace.

What the kubelet changes on the machine is put back by `cleanup`: the kernel tunables a kubelet
sets (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops), its cgroups, the pods' network
namespaces and mounts, the bridge, an extra node's mount namespace. Only one plane's nodes run on
a machine at a time: the first node's device plugin socket is
/var/lib/kubelet/device-plugins/kubelet.sock whatever its root folder.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from common import client_kubeconfig, free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NODE_NAME = "cozyrender-node"
PAUSE_IMAGE = "cozyrender.local/pause:3.10"
CNI_BIN = Path("/usr/lib/cni")
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
# The DRA driver (tools/node/draplugin): its name is the DeviceClass's name and CEL selector.
DRA_DRIVER = "gpu.cozyrender.io"
DRA_IDENTITY = "cozyrender-draplugin"
# The NetworkPolicy enforcer (tools/node/netpol): its service account, and the NFQUEUE it binds.
NETPOL_IDENTITY = "kube-network-policies"
NETPOL_QUEUE = 100
NFQUEUES = Path("/proc/net/netfilter/nfnetlink_queue")
# The scraper the chart's networkPolicy.extraIngress lets in (network_policy_values).
SCRAPER = {"namespace": "scrapers", "labels": {"app.kubernetes.io/name": "prometheus"}}
# One test node per machine: the kubelet's device-plugin socket (above) is machine-wide. This file
# names the node folder of the node running now; `cleanup` removes it.
MACHINE_LOCK = Path("/run/cozyrender-test-node")
MACHINE_WAIT = float(os.environ.get("COZYRENDER_NODE_WAIT", "900"))  # seconds to wait for another node to go
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The kernel tunables a kubelet sets at start (pkg/kubelet/cm: setupKernelTunables); put back on cleanup.
KERNEL_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
# The kube-controller-manager controllers a node needs beside the plane's own.
NODE_CONTROLLERS = ("serviceaccount-controller", "root-ca-certificate-publisher-controller",
                    "deployment-controller", "replicaset-controller", "disruption-controller",
                    "endpoints-controller", "endpointslice-controller", "node-lifecycle-controller",
                    # ResourceClaims from templates, and a claim's reservation released (then its
                    # allocation and finalizer) once no pod uses it.
                    "resourceclaim-controller")


class NodeError(RuntimeError):
    pass


def _run(argv: list[str], check: bool = True, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(argv[:4])}: {(result.stderr or result.stdout).strip()[:2000]}")
    return result


def pick_subnet() -> int:
    """A third octet N with no route or link on this machine for 10.250.N.0/24."""
    routes = _run(["ip", "-4", "route", "show", "table", "all"]).stdout
    links = _run(["ip", "-o", "link", "show"]).stdout
    used = [ipaddress.ip_network(word, strict=False) for line in routes.splitlines()
            for word in line.split()[:1] if "/" in word or word[:1].isdigit()]
    for n in random.sample(range(1, 255), 254):
        subnet = ipaddress.ip_network(f"10.250.{n}.0/24")
        if f"cozyr{n}:" not in links and not any(subnet.overlaps(net) for net in used):
            return n
    raise NodeError("no free 10.250.N.0/24 on this machine")


class Node:
    def __init__(self, plane, gpus: dict[str, int] | None = None, images: tuple[Path, ...] = (),
                 dra_gpus: int = 0, index: int = 0) -> None:
        self.plane = plane
        # index 0: the plane's node, `cozyrender-node` in <plane>/node; index i > 0: an extra node
        # `cozyrender-node-<i+1>` in <plane>/node-<i+1>, without GPUs, in a mount namespace of its own.
        self.index = index
        self.name = NODE_NAME if index == 0 else f"{NODE_NAME}-{index + 1}"
        self.dir = plane.dir / ("node" if index == 0 else f"node-{index + 1}")
        self.prefix = "" if index == 0 else f"node-{index + 1}-"  # of its process names and ports
        self.mount_holder = 0  # an extra node: the process holding its mount namespace
        if index and (gpus or dra_gpus):
            raise NodeError("an extra node has no GPUs: no device plugin, no DRA driver")
        self.gpus = dict(gpus or {})
        self.dra_gpus = dra_gpus  # devices the DRA driver publishes; 0: no DRA driver
        self.cdi_dir = self.dir / "cdi"
        self.images = tuple(images) or (REPO / "dist" / "pause-image.tar", REPO / "dist" / "cozyrender-image.tar")
        self.subnet_octet = pick_subnet()
        self.gateway = f"10.250.{self.subnet_octet}.1"
        self.bridge = f"cozyr{self.subnet_octet}"
        self.cgroup = f"cozyrender-{self.subnet_octet}"
        self.socket = self.dir / "containerd" / "containerd.sock"
        self.runc_root = self.dir / "runc"
        self.apiserver_port = 0

    # -- the state cleanup reads --------------------------------------------------

    def _save(self, **extra) -> None:
        state = {"bridge": self.bridge, "cgroup": self.cgroup, "socket": str(self.socket),
                 "runc_root": str(self.runc_root), "gateway": self.gateway, "name": self.name,
                 "mount_holder": self.mount_holder, **extra}
        previous = self.dir / "node.json"
        if previous.exists():
            state = {**json.loads(previous.read_text()), **state}
        previous.write_text(json.dumps(state, indent=2))

    # -- start -------------------------------------------------------------------

    def start(self) -> None:
        for path in (self.images + (CNI_BIN / "bridge", Path(shutil.which("containerd") or "containerd"),
                                    Path(shutil.which("runc") or "/usr/sbin/runc"))):
            if not path.exists():
                raise NodeError(f"{path} is missing: run `make image node-packages`")
        for binary in ("kubelet", "kube-scheduler", *(("cozyrender-draplugin",) if self.dra_gpus else ()),
                       *(("kube-network-policies",) if self.index == 0 and self.plane.network_policy
                         else ())):
            if not (self.plane.bin / binary).exists():
                raise NodeError(f"{self.plane.bin / binary} is missing: run `make node`")
        if self.index == 0:  # an extra node's plane holds the machine already
            self._claim_machine()
            self._unmount_stale()
        self.dir.mkdir(parents=True, exist_ok=True)
        tunables = {name: Path("/proc/sys", name).read_text().strip() for name in KERNEL_TUNABLES}
        self._save(tunables=tunables)
        self._network()
        if self.index == 0:
            self._apiserver_forward()
        else:
            self._mount_namespace()
        self._containerd()
        self._import_images()
        self._kubelet()
        if self.index == 0:
            self._scheduler()
            if self.plane.network_policy:
                self._network_policy()
        elif self.plane.network_policy:  # the enforcer runs already (the plane's node started first)
            self._queue_to_enforcer()
        if self.gpus:
            self._device_plugin()
        if self.dra_gpus:
            self._dra_plugin()
        self.wait_ready()
        if self.dra_gpus:
            self.wait_resource_slice()

    def _claim_machine(self) -> None:
        """Refuse a second node while another one's state is on the machine (two kubelets would
        share the device-plugin socket and break each other), after waiting MACHINE_WAIT seconds
        for it to go."""
        deadline = time.monotonic() + MACHINE_WAIT
        while True:  # another run's node (a developer's `make cluster`, a second test run) may be going
            try:
                holder = Path(MACHINE_LOCK.read_text().strip())
            except OSError:
                holder = None
            if holder is None or holder == self.dir or not (holder / "node.json").exists() \
                    or time.monotonic() >= deadline:
                break
            time.sleep(2)
        if holder is not None and holder != self.dir and (holder / "node.json").exists():
            raise NodeError(f"a test node ({holder}) is already on this machine, and only one can be: stop it first "
                            f"(`python tools/controlplane/cluster.py down --dir {holder.parent}`)")
        MACHINE_LOCK.write_text(f"{self.dir}\n")

    def _unmount_stale(self) -> None:
        """Unmount what an earlier node left mounted (its run was killed before `cleanup`): the
        kubelet's volumes and containerd's root filesystems under another node's directory,
        which no node holds any more (the lock says this one is the only one)."""
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        stale = [m for m in mounts if any(f"/node/{part}" in m for part in ("kubelet", "containerd"))
                 and not m.startswith(f"{self.dir.resolve()}/")]
        for mount in sorted(stale, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)

    def _mount_namespace(self) -> None:
        """An extra node's mount namespace: a holder process (`unshare --mount --propagation slave`)
        with private folders bind-mounted over the kubelet's machine-wide paths: the device-plugin
        folder (a kubelet's device manager deletes every socket there on start, the first node's
        device plugin's included) and the pod log folders (a kubelet's garbage collection removes
        the log folders of pods it does not know: the other node's). Its containerd and kubelet
        run in it (`nsenter --mount`); what they mount stays in it and goes with it."""
        script = []
        for shared, private in ((DEVICE_PLUGIN_DIR, "device-plugins"), (Path("/var/log/pods"), "log-pods"),
                                (Path("/var/log/containers"), "log-containers")):
            shared.mkdir(parents=True, exist_ok=True)
            (self.dir / private).mkdir(exist_ok=True)
            script.append(f"mount --bind {shlex.quote(str(self.dir / private))} {shlex.quote(str(shared))}")
        mounted = self.dir / "mounts-ready"
        script += [f"touch {shlex.quote(str(mounted))}", "exec sleep infinity"]
        name = f"{self.prefix}mounts"
        self.plane._spawn(name, ["unshare", "--mount", "--propagation", "slave", "sh", "-ec", " && ".join(script)])
        self.mount_holder = self.plane.pids[name]
        self._save()
        self.plane._wait(f"{self.name}'s mount namespace", mounted.exists, 30)
        self._save(mount_namespace=os.stat(f"/proc/{self.mount_holder}/ns/mnt").st_ino)

    def _in_namespace(self, argv: list[str]) -> list[str]:
        """`argv` run in the node's mount namespace (an extra node's), or as it is."""
        return ["nsenter", f"--mount=/proc/{self.mount_holder}/ns/mnt", *argv] if self.mount_holder else argv

    def _network(self) -> None:
        # The bridge's MAC address set, so it never changes: a Linux bridge left to choose takes
        # the lowest MAC of its ports, so a pod's veth joining or leaving can change it. The
        # other pods keep the gateway's old address in their neighbour tables (the host's ARP
        # requests to them came from the API server forward's address, not the gateway's, and
        # refresh no entry for it) and send to it, into nothing, until that entry expires: a
        # capture of node 2's bridge saw a veth join with a lower MAC and three pods answer the
        # kubelet's SYNs to the old one for 37 s, every probe and admission call to them timing
        # out meanwhile (issue 34's intermittent 10 s timeouts). Docker pins docker0's the same
        # way. Locally administered (02:...) and one per node: 02:00:0a:fa:N:01 for 10.250.N.1.
        _run(["ip", "link", "add", self.bridge, "address", bridge_mac(self.subnet_octet), "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        conf = self.dir / "cni" / "net.d"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "10-cozyrender.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "cozyrender",
            "plugins": [
                {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False,
                 "ipam": {"type": "host-local", "dataDir": str(self.dir / "cni" / "ipam"),
                          "ranges": [[{"subnet": f"10.250.{self.subnet_octet}.0/24",
                                       "gateway": self.gateway}]],
                          # The pod networks of every node (10.250.0.0/16: pod to pod across
                          # nodes, as Kubernetes' network model asks; the host forwards between
                          # the bridges) and the first node's gateway in it (the API server's
                          # forward): nothing routes a pod elsewhere.
                          "routes": [{"dst": "10.250.0.0/16"}]}},
                {"type": "loopback"},
            ],
        }, indent=2))

    def _apiserver_forward(self) -> None:

        self.apiserver_port = free_port()
        self.plane._spawn("node-apiserver-forward", [
            sys.executable, str(HERE / "balancer.py"), "--listen", f"{self.gateway}:{self.apiserver_port}",
            "--backend", f"127.0.0.1:{self.plane.ports['apiserver']}"])
        self.plane.ports["node-apiserver"] = self.apiserver_port

    def _containerd(self) -> None:
        root = self.dir / "containerd"
        root.mkdir(parents=True, exist_ok=True)
        cri = '[plugins."io.containerd.grpc.v1.cri"]'
        runc = shutil.which("runc") or "/usr/sbin/runc"
        config = f"""version = 2
root = "{root / 'root'}"
state = "{root / 'state'}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / 'opt'}"
{cri}
  sandbox_image = "{PAUSE_IMAGE}"
  disable_apparmor = true
  # Root here lacks CAP_SYS_RESOURCE: no score below containerd's own.
  restrict_oom_score_adj = true
  tolerate_missing_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The pods' network namespaces under the run's folder, not /var/run/netns.
  netns_mounts_under_state_dir = true
{cri[:-1]}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
{cri[:-1]}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri[:-1]}.containerd.runtimes.runc.options]
  BinaryName = "{self._cdi_runtime(runc) if self.dra_gpus else runc}"
  Root = "{self.runc_root}"
  SystemdCgroup = false
{cri[:-1]}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{self.dir / 'cni' / 'net.d'}"
"""
        if self.plane.registry is not None:  # registry.py: hosts.toml per registry host, with its CA
            config += f'{cri[:-1]}.registry]\n  config_path = "{self.plane.registry.hosts_dir}"\n'
        (root / "config.toml").write_text(config)
        self.plane._spawn(f"{self.prefix}containerd",
                          self._in_namespace(["containerd", "--config", str(root / "config.toml")]))
        self.plane._wait(f"{self.prefix}containerd", lambda: self.ctr("version", check=False).returncode == 0, 60)

    def _cdi_runtime(self, runc: str) -> Path:
        """runc behind tools/node/cdi_runc.py (containerd's BinaryName takes no arguments)."""
        wrapper = self.dir / "containerd" / "cdi-runc"
        argv = [sys.executable, "-I", "-S", str(REPO / "tools" / "node" / "cdi_runc.py"), "--runc", runc,
                "--cdi-dir", str(self.cdi_dir), "--kubelet-dir", str(self.dir / "kubelet"), "--"]
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.join(argv)} \"$@\"\n")
        wrapper.chmod(0o755)
        return wrapper

    def ctr(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        return _run(["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
                    check=check, timeout=timeout)

    def _import_images(self) -> None:
        for archive in self.images:
            if self.plane.registry is not None and archive.name == "cozyrender-image.tar":
                continue  # pulled from the registry (registry.py)
            self.ctr("images", "import", str(archive))

    def _kubelet(self) -> None:

        plane = self.plane
        pki = plane.pki
        kubelet_client = plane.ca.issue(f"{self.prefix}kubelet-client", f"system:node:{self.name}",
                                        organizations=("system:nodes",), client=True)
        serving = plane.ca.issue(f"{self.prefix}kubelet-serving", self.name,
                                 server_names=(self.gateway, "127.0.0.1", self.name))
        kubeconfig = self.dir / "kubelet-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(client_kubeconfig(plane.server, pki / "ca.crt", *kubelet_client, self.name)))
        for hierarchy in self._cgroup_hierarchies():
            path = hierarchy / self.cgroup
            path.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (path / name).write_text((hierarchy / name).read_text())
        port, healthz = free_port(), free_port()
        plane.ports.update({f"{self.prefix}kubelet": port, f"{self.prefix}kubelet_healthz": healthz})
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # This machine's cgroups are a v1/v2 hybrid; a 1.35 kubelet refuses v1 unless told.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{self.cgroup}", "cgroupsPerQOS": True,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.gateway, "port": port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
            "tlsCertFile": str(serving[0]), "tlsPrivateKeyFile": str(serving[1]),
            "authentication": {"x509": {"clientCAFile": str(pki / "ca.crt")},
                               "webhook": {"enabled": False}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            # No DNS anywhere: pods get no resolver (nothing may resolve names here).
            "resolvConf": "", "clusterDNS": [],
            "failSwapOn": False,
            # Root lacks CAP_SYS_RESOURCE: no rlimit above the hard limit (nofile 20000), and
            # no oom_score_adj below its own.
            "maxOpenFiles": 20000, "oomScoreAdj": 0,
            # A shared disk: never evict for it.
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "nodeStatusUpdateFrequency": "5s", "syncFrequency": "10s", "fileCheckFrequency": "10s",
            "serializeImagePulls": False, "registerNode": True,
            "volumePluginDir": str(self.dir / "volume-plugins"),
            "podPidsLimit": -1, "maxPods": 50,
            "shutdownGracePeriod": "0s",
            "featureGates": {},
        }
        config_file = self.dir / "kubelet-config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        plane._spawn(f"{self.prefix}kubelet", self._in_namespace([
            str(plane.bin / "kubelet"), f"--config={config_file}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.dir / 'kubelet'}", f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.name}", f"--node-ip={self.gateway}",
            f"--node-labels=cozyrender.io/test-node=true", "--v=1",
        ]))

    def _scheduler(self) -> None:

        plane = self.plane
        cert = plane.ca.issue("scheduler", "system:kube-scheduler", client=True)
        kubeconfig = self.dir / "scheduler-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(client_kubeconfig(plane.server, plane.pki / "ca.crt", *cert,
                                                         "system:kube-scheduler")))
        plane._spawn("kube-scheduler", [
            str(plane.bin / "kube-scheduler"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--v=1",
        ])

    def _network_policy(self) -> None:
        """kube-network-policies with upstream's RBAC and a token of its service account, reading
        the API server on loopback through in-cluster configuration (a tmpfs over /run in a mount
        namespace of its own holds /run/secrets/kubernetes.io/serviceaccount); once its NFQUEUE is
        bound (after its caches synced), the bridge's new forwarded connections are queued to it."""

        plane = self.plane
        plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": netpol_objects()}))
        account = self.dir / "netpol-serviceaccount"
        account.mkdir(exist_ok=True)
        token = plane.kubectl("-n", "kube-system", "create", "token", NETPOL_IDENTITY, "--duration=48h").stdout
        (account / "token").write_text(token.strip())
        shutil.copy(plane.pki / "ca.crt", account / "ca.crt")
        secrets = "/run/secrets/kubernetes.io/serviceaccount"
        argv = [str(plane.bin / "kube-network-policies"), f"--hostname-override={self.name}",
                f"--nfqueue-id={NETPOL_QUEUE}", f"--metrics-bind-address=127.0.0.1:{free_port()}", "--v=2"]
        script = (f"mount -t tmpfs -o size=1m,mode=0755 cozyrender-netpol /run && mkdir -p {secrets} && "
                  f"cp {shlex.quote(str(account))}/token {shlex.quote(str(account))}/ca.crt {secrets}/ && "
                  f"exec {shlex.join(argv)}")
        # Its own command catches SIGINT only (then deletes its table); SIGTERM would leave the table.
        plane.stop_signals["netpol"] = signal.SIGINT
        plane._spawn("netpol", ["unshare", "--mount", "--propagation", "private", "sh", "-ec", script],
                     env={**os.environ, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                          "KUBERNETES_SERVICE_PORT": str(plane.ports["apiserver"])})
        plane._wait("kube-network-policies' NFQUEUE", lambda: str(NETPOL_QUEUE) in
                    [line.split()[0] for line in NFQUEUES.read_text().splitlines() if line.strip()], 60)
        self._queue_to_enforcer()

    def _queue_to_enforcer(self) -> None:
        """This node's pods' new connections (bridged between them, or routed to or from another
        node's pods) queued to the enforcer, which evaluates the policies of whichever pods own the
        two addresses, on any node."""
        rules = netpol_rules(self.bridge)
        self._save(netpol_rules=rules)
        for rule in rules:
            _run(["iptables", "-w", "-I", *rule])

    def _device_plugin(self) -> None:
        argv = [str(self.plane.bin / "cozyrender-deviceplugin"), f"--plugin-dir={DEVICE_PLUGIN_DIR}"]
        argv += [f"--resource={name}={count}" for name, count in sorted(self.gpus.items())]
        self.plane._spawn("deviceplugin", argv)

    def _dra_plugin(self) -> None:
        """The DeviceClass and the driver's RBAC (what a driver's ServiceAccount is given), then the
        driver with a client certificate of its own."""

        plane = self.plane
        plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": dra_objects()}))
        cert = plane.ca.issue("draplugin", DRA_IDENTITY, client=True)
        kubeconfig = self.dir / "draplugin-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(client_kubeconfig(plane.server, plane.pki / "ca.crt", *cert, DRA_IDENTITY)))
        kubelet_root = self.dir / "kubelet"
        plane._spawn("draplugin", [
            str(plane.bin / "cozyrender-draplugin"), f"--node-name={self.name}", f"--kubeconfig={kubeconfig}",
            f"--devices={self.dra_gpus}", "--model=A100", "--memory=40Gi",
            f"--registry-dir={kubelet_root / 'plugins_registry'}",
            f"--plugin-dir={kubelet_root / 'plugins' / DRA_DRIVER}", f"--cdi-dir={self.cdi_dir}",
        ])

    def resource_slices(self) -> list[dict]:
        """The driver's ResourceSlices for this node."""
        listed = self.plane.kubectl("get", "resourceslices", "-o", "json",
                                    f"--field-selector=spec.nodeName={self.name},spec.driver={DRA_DRIVER}")
        return json.loads(listed.stdout)["items"]

    def wait_resource_slice(self, timeout: float = 60) -> None:
        self.plane._wait(f"the {DRA_DRIVER} ResourceSlice of {self.dra_gpus} devices",
                         lambda: sum(len(s["spec"].get("devices", [])) for s in self.resource_slices())
                         == self.dra_gpus, timeout)

    def apiserver_args(self) -> list[str]:
        # Admission webhooks (and aggregated APIs) called at their Service's endpoints, the pods'
        # addresses, instead of its cluster IP: no kube-proxy is needed, and nothing resolves a name.
        # The kubelet by its InternalIP (the bridge address), never by its name: nothing may resolve;
        # with a client certificate the kubelet accepts (logs, exec), checking the kubelet's.
        cert, key = self.plane.ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                        organizations=("system:masters",), client=True)
        return ["--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={cert}", f"--kubelet-client-key={key}",
                f"--kubelet-certificate-authority={self.plane.pki / 'ca.crt'}"]

    def controllers(self) -> tuple[str, ...]:
        return NODE_CONTROLLERS

    def pod_env(self) -> list[dict]:
        """The environment that points a pod's in-cluster client at the API server's forward."""
        return [{"name": "KUBERNETES_SERVICE_HOST", "value": self.gateway},
                {"name": "KUBERNETES_SERVICE_PORT", "value": str(self.apiserver_port)}]

    def install_webhook_chart(self, replicas: int, release: str = "cozyrender-webhook",
                              extra_values: dict | None = None, timeout: str = "5m",
                              cert_manager: bool = False) -> None:
        """`helm install` (Helm 4) of charts/cozyrender-webhook from the image, TLS from a Secret;
        with `cert_manager`, in the chart's default mode instead (cert-manager issues the serving
        certificate: certmanager.py installs it first)."""
        import base64

        sys.path.insert(0, str(REPO / "tools" / "image"))
        import build

        plane = self.plane
        namespace = "cozyrender-system"
        if cert_manager:
            tls = {"certManager": True}
        else:
            service = f"{release}.{namespace}.svc"
            cert, key = plane.ca.issue("webhook-service", service, server_names=(service, f"{service}.cluster.local"))
            secret = f"{release}-serving"
            plane.kubectl("-n", namespace, "create", "secret", "tls", secret, f"--cert={cert}", f"--key={key}")
            tls = {"certManager": False, "secretName": secret, "caBundle": base64.b64encode(plane.ca_pem).decode()}
        chart, source = str(REPO / "charts" / "cozyrender-webhook"), {"image": build.image_reference(),
                                                                       "imagePullPolicy": "Never"}
        if plane.registry is not None:  # the image by digest and the chart from the registry (registry.py)
            plane.registry.pull_secret(namespace, "cozyrender-registry")
            source = {"image": plane.registry.image[0], "imageDigest": plane.registry.image[1],
                      "imagePullPolicy": "IfNotPresent", "imagePullSecrets": [{"name": "cozyrender-registry"}]}
            chart = plane.registry.chart[0]
        values = {
            **source, "replicas": replicas,
            "tls": tls,
            "env": self.pod_env(),
            # Only kube-apiserver may call the webhook: it presents the callers' CA's certificate
            # (cluster.py's AdmissionConfiguration). No Cilium here, so no CiliumNetworkPolicy.
            "clientAuth": {"caBundle": base64.b64encode(plane.webhook_client_ca.read_bytes()).decode()},
            "networkPolicy": self.network_policy_values() if plane.network_policy else {"type": "none"},
            "fluxInjection": ("--flux-injection" in plane.webhook_args if plane.flux_injection is None
                              else plane.flux_injection),
            **(extra_values or {}),
        }
        self.webhook_values = values
        pinned = (("--version", plane.registry.chart[1], "--ca-file", str(plane.registry.ca))
                  if plane.registry is not None else ())
        self.helm("install", release, chart, *pinned, "--namespace", namespace, "--wait", "--timeout", timeout,
                  values=values)

    def network_policy_values(self) -> dict:
        """The chart's plain NetworkPolicy, as enforced here: kube-apiserver reaches the pods from
        the node, with the bridge address as its source; a scraper (SCRAPER) is let in to both
        metrics ports through extraIngress, as the threat model tells a hoster to let Prometheus
        in. The aggregated server's pods (aggapi.py, labelled as Cozystack labels cozystack-api)
        are let in by the chart's default networkPolicy.callers, as on Cozystack."""
        def peer(namespace: str, labels: dict) -> dict:
            return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                    "podSelector": {"matchLabels": labels}}

        extra = [{"from": [peer(SCRAPER["namespace"], SCRAPER["labels"])],
                  "ports": [{"port": 8443, "protocol": "TCP"}, {"port": 8080, "protocol": "TCP"}]}]
        return {"type": "kubernetes", "apiServerCIDRs": [f"{self.gateway}/32"], "extraIngress": extra}

    def helm_env(self) -> dict:
        """The environment Helm runs in against this plane: its own home under the run's folder."""
        helm_home = self.plane.dir / "helm"
        return {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig), "HELM_CACHE_HOME": str(helm_home),
                "HELM_CONFIG_HOME": str(helm_home), "HELM_DATA_HOME": str(helm_home)}

    def helm(self, *args: str, values: dict | None = None, timeout: float = 600,
             check: bool = True) -> subprocess.CompletedProcess:
        plane = self.plane
        argv = [str(plane.bin / "helm4"), *args, f"--kubeconfig={plane.kubeconfig}"]
        if values is not None:
            values_file = self.dir / "webhook-values.yaml"
            values_file.write_text(yaml.safe_dump(values))
            argv += ["-f", str(values_file)]
        return _run(argv, check=check, timeout=timeout, env=self.helm_env())

    def node(self) -> dict | None:
        result = self.plane.kubectl("get", "node", self.name, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def wait_ready(self, timeout: float = 180) -> None:
        def ready() -> bool:
            node = self.node()
            if not node:
                return False
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            allocatable = node["status"].get("allocatable", {})
            taints = [t for t in node["spec"].get("taints", []) if t.get("effect") in ("NoSchedule", "NoExecute")]
            return (conditions.get("Ready") == "True" and not taints
                    and all(allocatable.get(name) == str(count) for name, count in self.gpus.items()))
        self.plane._wait(f"node {self.name} Ready", ready, timeout)

    def _cgroup_hierarchies(self) -> list[Path]:
        return [path for path in sorted(CGROUP_ROOT.iterdir()) if (path / "cgroup.procs").exists()]


def dra_objects() -> list[dict]:
    """The DeviceClass offering the driver's devices, and what the driver's identity may do: publish
    its node's ResourceSlices, read the claims it prepares and its node (the slices' owner)."""
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRA_DRIVER},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": DRA_IDENTITY},
         "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                   {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": DRA_IDENTITY},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DRA_IDENTITY},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DRA_IDENTITY}]},
    ]


def bridge_mac(octet: int) -> str:
    """The fixed MAC address of the bridge of subnet 10.250.`octet`.0/24 (see Node._network)."""
    return f"02:00:0a:fa:{octet:02x}:01"


def netpol_rules(bridge: str) -> list[list[str]]:
    """The iptables rules (without their -I/-D) queueing to the enforcer the new connections forwarded
    out of and into `bridge` (a packet is queued once: the enforcer's accept ends its FORWARD chain),
    between pods only: a connection to or from an address of the host itself (the API server's and
    etcd's forwards on the gateways) is the node's own traffic, which no policy here selects and which
    kube-network-policies does not filter either; queueing it made every pod's API call wait on the
    enforcer (under a full test run's load, long enough to fail the aggregated server's readiness)."""
    return [["FORWARD", direction, bridge, "-m", "addrtype", "!", "--src-type", "LOCAL",
             "-m", "addrtype", "!", "--dst-type", "LOCAL", "-m", "conntrack", "--ctstate", "NEW",
             "-j", "NFQUEUE", "--queue-num", str(NETPOL_QUEUE)] for direction in ("-o", "-i")]


def netpol_objects() -> list[dict]:
    """kube-network-policies' service account and what upstream's install.yaml grants it: list and
    watch pods, namespaces and NetworkPolicies."""
    meta = {"name": NETPOL_IDENTITY}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
                   {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NETPOL_IDENTITY},
         "subjects": [{"kind": "ServiceAccount", "name": NETPOL_IDENTITY, "namespace": "kube-system"}]},
    ]


# -- cleanup (also from `cluster.py down`, by the saved state) ----------------------


def _pids_matching(needle: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def release_machine(directory: Path) -> None:
    """The machine lock off, if the node of `directory` holds it."""
    try:
        if Path(MACHINE_LOCK.read_text().strip()) == (Path(directory) / "node").resolve():
            MACHINE_LOCK.unlink()
    except OSError:
        pass


def cleanup(directory: Path) -> None:
    """Remove what the nodes of the plane in `directory` left on the machine (its processes are
    gone or going): the extra nodes (node-2, ...) first, the plane's node last."""
    release_machine(directory)
    for node_dir in (*sorted(Path(directory).glob("node-*/")), Path(directory) / "node"):
        _cleanup_node(node_dir)


def _cleanup_node(node_dir: Path) -> None:
    state_file = node_dir / "node.json"
    if not state_file.exists():
        return
    state = json.loads(state_file.read_text())
    holder = state.get("mount_holder", 0)
    runc_root = Path(state["runc_root"]) / "k8s.io"
    netns_inodes = set()
    if runc_root.exists():
        listed = _run(["runc", "--root", str(runc_root), "list", "--format", "json"], check=False).stdout
        for container in json.loads(listed or "null") or []:
            try:
                netns_inodes.add(os.stat(f"/proc/{container['pid']}/ns/net").st_ino)
            except (OSError, KeyError):
                pass
            _run(["runc", "--root", str(runc_root), "kill", container["id"], "KILL"], check=False)
            _run(["runc", "--root", str(runc_root), "delete", "--force", container["id"]], check=False)
    # containerd's shims name our socket on their command line; nothing else does.
    for pid in _pids_matching(state["socket"]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    netns = Path("/var/run/netns")
    if netns.exists() and netns_inodes:
        for path in netns.iterdir():
            try:
                if path.stat().st_ino in netns_inodes:
                    subprocess.run(["umount", str(path)], capture_output=True)
                    path.unlink()
            except OSError:
                pass
    if holder:
        # An extra node: its mounts are in its own namespace, which goes with the holder (and the
        # kubelet, containerd and shims, gone above or by the plane's stop).
        try:
            if os.stat(f"/proc/{holder}/ns/mnt").st_ino == state.get("mount_namespace"):
                os.kill(holder, signal.SIGKILL)
        except OSError:
            pass
    node_dir = str(node_dir.resolve())
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m == node_dir or m.startswith(f"{node_dir}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    for rule in state.get("netpol_rules", []):
        _run(["iptables", "-w", "-D", *rule], check=False)
    _run(["ip", "link", "del", state["bridge"]], check=False)
    for hierarchy in sorted(CGROUP_ROOT.iterdir()):
        top = hierarchy / state["cgroup"]
        if top.is_dir():
            for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                _rmdir_cgroup(path)
            _rmdir_cgroup(top)
    # The kubelet's device checkpoint too: a later kubelet would trust its stale allocations.
    # (An extra node's were in its private folder.)
    for name in () if holder else ("kubelet.sock", "kubelet_internal_checkpoint", *(p.name for p in DEVICE_PLUGIN_DIR.glob("cozyrender-*.sock"))):
        try:
            (DEVICE_PLUGIN_DIR / name).unlink()
        except OSError:
            pass
    for name, value in state.get("tunables", {}).items():
        try:
            Path("/proc/sys", name).write_text(value)
        except OSError:
            pass
    state_file.unlink()


def _rmdir_cgroup(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
