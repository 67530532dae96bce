"""cert-manager on the test node: its CRDs, and its controller and cainjector as pods.

`install(plane)` on a `ControlPlane` started with `node=True` (node.py):
- the cert-manager.io CRDs (Certificate, CertificateRequest, Issuer, ClusterIssuer), read from
  the module's deploy/crds that `make certmanager` copies to .cache/cert-manager-crds (no ACME
  CRDs: no ACME issuer is built in);
- the images built here (`make certmanager`: dist/cert-manager-{controller,cainjector}-image.tar,
  tools/image/build.py), imported into the node's containerd, never pulled;
- the namespace `cert-manager`, one ServiceAccount, ClusterRole and ClusterRoleBinding per
  component with the verbs its controllers use, and one Deployment (1 replica, no leader
  election: nothing to elect) per component, told the API server's address for pods
  (`Node.pod_env`).

The manifests are this project's own, written for this node: the controller links only the
self-signed and CA issuers (tools/certmanager/controller), so it has nothing that resolves a
name or dials anything but the API server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NAMESPACE = "cert-manager"
CRDS = REPO / ".cache" / "cert-manager-crds"
COMPONENTS = ("controller", "cainjector")
HEALTH_PORTS = {"controller": 9403, "cainjector": 9404}
# What each component reads and writes; everything else is refused it.
RULES = {
    "controller": [
        {"apiGroups": ["cert-manager.io"],
         "resources": ["issuers", "clusterissuers", "certificates", "certificaterequests"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["cert-manager.io"],
         "resources": ["issuers/status", "clusterissuers/status", "certificates/status",
                       "certificaterequests/status", "certificates/finalizers", "certificaterequests/finalizers"],
         "verbs": ["update", "patch"]},
        # The approver approves requests for cert-manager.io's own issuer kinds.
        {"apiGroups": ["cert-manager.io"], "resources": ["signers"], "verbs": ["approve"],
         "resourceNames": ["issuers.cert-manager.io/*", "clusterissuers.cert-manager.io/*"]},
        {"apiGroups": [""], "resources": ["secrets"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ],
    "cainjector": [
        {"apiGroups": ["cert-manager.io"], "resources": ["certificates"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ],
}


class CertManagerError(RuntimeError):
    pass


def images() -> list[Path]:
    return [REPO / "dist" / f"cert-manager-{component}-image.tar" for component in COMPONENTS]


def manifests(pod_env: list[dict]) -> list[dict]:
    """The namespace, RBAC and Deployments (not the CRDs)."""
    sys.path.insert(0, str(REPO / "tools" / "image"))
    import build

    objects: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for component in COMPONENTS:
        name = f"cert-manager-{component}"
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "cert-manager"}
        port = HEALTH_PORTS[component]
        objects += [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
             "rules": RULES[component]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
             "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "strategy": {"type": "Recreate"},
                      "template": {"metadata": {"labels": labels}, "spec": {
                          "serviceAccountName": name, "terminationGracePeriodSeconds": 5,
                          "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                          "containers": [{
                              "name": component, "image": build.cert_manager_reference(component),
                              "imagePullPolicy": "Never",
                              "args": [f"--health-address=:{port}", "--v=2",
                                       *([f"--cluster-resource-namespace={NAMESPACE}"]
                                         if component == "controller" else [])],
                              "env": pod_env,
                              "ports": [{"name": "health", "containerPort": port}],
                              "readinessProbe": {"httpGet": {"path": "/healthz", "port": "health"},
                                                 "periodSeconds": 2},
                              "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                  "capabilities": {"drop": ["ALL"]}},
                          }]}}}},
        ]
    return objects


def install(plane, timeout: str = "180s") -> None:
    """The CRDs, the images and both components, waited for until available."""
    node = plane.node
    if node is None:
        raise CertManagerError("cert-manager runs as pods: start the plane with node=True")
    crds = sorted(CRDS.glob("cert-manager.io_*.yaml"))
    missing = [path for path in images() if not path.exists()]
    if not crds or missing:
        raise CertManagerError(f"{missing[0] if missing else CRDS} is missing: run `make certmanager`")
    for path in images():
        node.ctr("images", "import", str(path))
    for crd in crds:
        plane.kubectl("apply", "--server-side", "-f", str(crd))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  *(f"crd/{kind}.cert-manager.io" for kind in
                    ("certificates", "certificaterequests", "issuers", "clusterissuers")), timeout=90)
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                         "items": manifests(node.pod_env())}))
    for component in COMPONENTS:
        plane.kubectl("-n", NAMESPACE, "rollout", "status", "--timeout", timeout,
                      f"deployment/cert-manager-{component}", timeout=240)


def uninstall(plane) -> None:
    """Everything `install` created, the CRDs (and so every cert-manager object) included."""
    plane.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s", "--ignore-not-found",
                  timeout=150)
    for component in COMPONENTS:
        name = f"cert-manager-{component}"
        plane.kubectl("delete", "clusterrole,clusterrolebinding", name, "--ignore-not-found")
    for crd in sorted(CRDS.glob("cert-manager.io_*.yaml")):
        plane.kubectl("delete", "-f", str(crd), "--ignore-not-found", "--wait=true", "--timeout=120s",
                      timeout=150)
