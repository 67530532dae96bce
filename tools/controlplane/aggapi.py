"""The apps.cozystack.io aggregated API server on the test node (`ControlPlane(aggapi=True)`,
`cluster.py up --node --aggapi`): cozyrender's stand-in for cozystack-api (tools/aggapi).

What it adds to a plane with a node:
- kube-apiserver as an aggregator (`apiserver_args`): a front-proxy CA of its own
  (`pki/front-proxy/`), the client certificate the aggregator presents to aggregated servers
  (CN `front-proxy-client`) and the request-header flags that tell them who asked; kube-apiserver
  publishes these in kube-system's `extension-apiserver-authentication` ConfigMap;
- etcd for pods: a TCP forward from the bridge address to the loopback etcd (the stand-in
  stores the apps there under its own prefix, `/cozystack-apps-apiserver`);
- in `cozy-system`, as Cozystack names them: the ServiceAccount, the Deployment (1 replica, the
  image `make aggapi` builds, imported into the node's containerd), the Service and the
  APIService `v1alpha1.apps.cozystack.io`; RBAC: `system:auth-delegator` (token and access
  reviews), the `extension-apiserver-authentication-reader` Role in kube-system, and a ClusterRole
  reading what the admission chain reads (namespaces, webhook and policy configurations, the
  webhooks' Services and EndpointSlices);
- its admission configuration (the Secret `cozystack-api-admission`): a
  WebhookAdmissionConfiguration whose kubeConfigFile presents a client certificate from the
  webhook callers' CA (`pki/webhook-callers/`, the CA the webhook's `--client-ca` trusts), as
  cluster.py does for kube-apiserver; `set_client_certificate(plane, False)` takes it away;
- the kinds' spec schemas (the ConfigMap `cozystack-api-schemas`), written from
  `cozyrender.appspec.spec_schema`, the schemas `check` and the webhook read.

No stand-in CRD of apps.cozystack.io is installed with it: the group is served by the pod alone.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import yaml

from common import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NAMESPACE = "cozy-system"
NAME = "cozystack-api"  # as Cozystack names its Deployment, Service and ServiceAccount
PORT = 8443
APISERVICE = "v1alpha1.apps.cozystack.io"
ETCD_PREFIX = "/cozystack-apps-apiserver"
LABELS = {"app": NAME, "app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "cozyrender-test"}
KINDS = ("Tenant", "VMInstance", "KubernetesNodes", "Kubernetes")
MOUNT = "/etc/cozystack-api"
FRONT_PROXY_CLIENT = "front-proxy-client"
READ_RULES = [
    {"apiGroups": [""], "resources": ["namespaces", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                   "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                   "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
     "verbs": ["get", "list", "watch"]},
]


class AggAPIError(RuntimeError):
    pass


def image() -> Path:
    return REPO / "dist" / "cozystack-apps-apiserver-image.tar"


def front_proxy_pki(plane) -> None:
    """The front-proxy CA and the aggregator's client certificate (before kube-apiserver starts)."""
    from pki import CA

    directory = plane.pki / "front-proxy"
    directory.mkdir(exist_ok=True)
    ca = CA(directory)
    plane.front_proxy_ca = ca.cert_path
    plane.front_proxy_client = ca.issue(FRONT_PROXY_CLIENT, FRONT_PROXY_CLIENT, client=True)


def apiserver_args(plane) -> list[str]:
    cert, key = plane.front_proxy_client
    return [f"--requestheader-client-ca-file={plane.front_proxy_ca}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={cert}", f"--proxy-client-key-file={key}"]


def spec_schemas() -> dict[str, str]:
    """`<kind>.json` for each kind: the schema cozyrender.appspec checks a spec against."""
    from cozyrender.appspec import spec_schema

    return {f"{kind.lower()}.json": json.dumps(spec_schema(kind), sort_keys=True) for kind in KINDS}


def admission_files(plane, client_certificate: bool) -> dict[str, str]:
    """The admission configuration and the kubeconfig it names, as files in the pod. With
    `client_certificate`, the kubeconfig presents a certificate of the webhook callers' CA to
    every webhook (`*`); without, it names no user, and nothing is presented."""
    files = {}
    users = []
    if client_certificate:
        cert, key = plane.aggapi_caller_cert
        files["tls.crt"], files["tls.key"] = cert.read_text(), key.read_text()
        users = [{"name": "*", "user": {"client-certificate": f"{MOUNT}/admission/tls.crt",
                                        "client-key": f"{MOUNT}/admission/tls.key"}}]
    files["kubeconfig"] = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": users})
    webhook = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
               "kubeConfigFile": f"{MOUNT}/admission/kubeconfig"}
    files["admission-config.yaml"] = yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": name, "configuration": webhook}
                    for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]})
    return files


def admission_secret(plane, client_certificate: bool) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"{NAME}-admission", "namespace": NAMESPACE},
            "stringData": admission_files(plane, client_certificate)}


def manifests(plane, etcd: str) -> list[dict]:
    """Everything but the image: RBAC, the Secrets and ConfigMap, the Deployment, Service and APIService."""
    sys.path.insert(0, str(REPO / "tools" / "image"))
    import build

    node = plane.node
    cert, key = plane.aggapi_serving_cert
    account = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    volumes = {"serving": {"secret": {"secretName": f"{NAME}-serving"}},
               "admission": {"secret": {"secretName": f"{NAME}-admission"}},
               "schemas": {"configMap": {"name": f"{NAME}-schemas"}}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME},
         "rules": READ_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [account]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{NAME}:system:auth-delegator"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
         "subjects": [account]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{NAME}-auth-reader", "namespace": "kube-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "extension-apiserver-authentication-reader"},
         "subjects": [account]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": f"{NAME}-serving", "namespace": NAMESPACE},
         "stringData": {"tls.crt": cert.read_text(), "tls.key": key.read_text()}},
        admission_secret(plane, client_certificate=True),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{NAME}-schemas", "namespace": NAMESPACE},
         "data": spec_schemas()},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
         "spec": {"replicas": replicas(plane), "selector": {"matchLabels": {"app": NAME}},
                  "template": {"metadata": {"labels": LABELS}, "spec": {
                      "serviceAccountName": NAME, "terminationGracePeriodSeconds": 5,
                      # One replica per node where it can (Cozystack runs two): a drained node
                      # leaves the other serving the apps.
                      "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                          "weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": NAME}},
                                                             "topologyKey": "kubernetes.io/hostname"}}]}},
                      "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                      "containers": [{
                          "name": NAME, "image": build.aggapi_reference(), "imagePullPolicy": "Never",
                          "args": [f"--secure-port={PORT}",
                                   f"--tls-cert-file={MOUNT}/serving/tls.crt",
                                   f"--tls-private-key-file={MOUNT}/serving/tls.key",
                                   f"--etcd-servers={etcd}", f"--etcd-prefix={ETCD_PREFIX}",
                                   f"--admission-control-config-file={MOUNT}/admission/admission-config.yaml",
                                   f"--app-schemas={MOUNT}/schemas",
                                   # No cluster DNS on the node: webhooks at their endpoints' addresses.
                                   "--webhook-endpoint-routing",
                                   # Not what this stand-in is for; it would need flowcontrol RBAC.
                                   "--enable-priority-and-fairness=false",
                                   "--v=2"],
                          "env": node.pod_env(),
                          "ports": [{"name": "https", "containerPort": PORT}],
                          "readinessProbe": {"httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
                                             "periodSeconds": 2},
                          "volumeMounts": [{"name": name, "mountPath": f"{MOUNT}/{name}", "readOnly": True}
                                           for name in volumes],
                          "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                              "capabilities": {"drop": ["ALL"]}},
                      }],
                      "volumes": [{"name": name, **source} for name, source in volumes.items()]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
         "spec": {"selector": {"app": NAME}, "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
         "spec": {"group": "apps.cozystack.io", "version": "v1alpha1", "groupPriorityMinimum": 1000,
                  "versionPriority": 15, "service": {"name": NAME, "namespace": NAMESPACE, "port": 443},
                  "caBundle": base64.b64encode(plane.ca_pem).decode()}},
    ]


def replicas(plane) -> int:
    """One replica per node of the plane."""
    return 1 + len(plane.extra_nodes)


def install(plane, timeout: float = 180) -> None:
    """The image, the manifests, and a wait until the APIService is Available and discovery
    lists the four kinds."""
    node = plane.node
    if node is None:
        raise AggAPIError("the aggregated server runs as a pod: start the plane with node=True")
    if not image().exists():
        raise AggAPIError(f"{image()} is missing: run `make aggapi`")

    for each in (node, *plane.extra_nodes):
        each.ctr("images", "import", str(image()))
    service = f"{NAME}.{NAMESPACE}.svc"
    plane.aggapi_serving_cert = plane.ca.issue(NAME, service, server_names=(service, f"{service}.cluster.local"))
    plane.aggapi_caller_cert = plane.webhook_caller_ca.issue(NAME, NAME, client=True)
    port = free_port()
    plane._spawn("node-etcd-forward", [
        sys.executable, str(HERE / "balancer.py"), "--listen", f"{node.gateway}:{port}",
        "--backend", f"127.0.0.1:{plane.ports['etcd']}"])
    plane.ports["node-etcd"] = port
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": manifests(plane, f"http://{node.gateway}:{port}")}))
    wait_available(plane, timeout)


def wait_available(plane, timeout: float = 180) -> None:
    """Until the Deployment has rolled out, the APIService is Available and discovery lists the kinds."""
    plane.kubectl("-n", NAMESPACE, "rollout", "status", "--timeout", f"{int(timeout)}s", f"deployment/{NAME}",
                  timeout=timeout + 30)
    plane.kubectl("wait", "--for=condition=Available", f"--timeout={int(timeout)}s", f"apiservice/{APISERVICE}",
                  timeout=timeout + 30)
    # The Service's endpoints are the new pods' alone (a pod going away is still listed,
    # not ready, until it has gone): the aggregator routes to ready endpoints only.
    def new_endpoints() -> bool:
        slices = json.loads(plane.kubectl("-n", NAMESPACE, "get", "endpointslices", "-l",
                                          f"kubernetes.io/service-name={NAME}", "-o", "json").stdout)["items"]
        endpoints = [e for s in slices for e in s.get("endpoints") or []]
        return len(endpoints) == replicas(plane) and all(e.get("conditions", {}).get("ready") is True
                                                         for e in endpoints)
    plane._wait(f"the {NAME} Service's ready endpoints, one per replica", new_endpoints, 60)
    plurals = ("tenants", "vminstances", "kubernetesnodeses", "kuberneteses")
    plane._wait("apps.cozystack.io discovery from the aggregated server",
                lambda: all(p in plane.kubectl("api-resources", "--api-group=apps.cozystack.io",
                                               check=False).stdout.split() for p in plurals), 60)


def set_client_certificate(plane, present: bool, timeout: float = 180) -> None:
    """The admission configuration with or without the client certificate, and the Deployment
    restarted to read it."""
    plane.kubectl("apply", "-f", "-", input=json.dumps(admission_secret(plane, present)))
    plane.kubectl("-n", NAMESPACE, "rollout", "restart", f"deployment/{NAME}")
    wait_available(plane, timeout)
