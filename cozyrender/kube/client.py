"""A Kubernetes client for what `cozyrender check` reads, and the resource
definitions of those kinds.

Rule: one place says which objects the budget rules read from a cluster
(WATCHED: kind, resource, scope, and which ones are kept: tenant namespaces
only, or tenant-root's `cozystack-values` Secret alone) and how to reach a
cluster (`--kubeconfig`/`--context`, else in-cluster config, else the
default kubeconfig). `read_state(client)` lists them all, as `check --state`
reads a file; the webhook's cache watches the same list.

lightkube is the client: typed generic resources for any group (the apps
kinds are served by cozystack-api, not CRDs), sync and small (httpx only),
its ApiError carries the server's Status (409 Conflict and 410 Gone are read
from it), and it handles kubeconfig contexts, client certificates and
in-cluster service-account tokens. Objects are read as plain dicts
(`Generic` resources), the shape every rule function takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cozyrender.namespaces import ROOT_NAMESPACE, is_tenant_namespace

VALUES_SECRET = "cozystack-values"


@dataclass(frozen=True)
class Watched:
    """One kind the rules read: its group, version, kind, plural, scope, and
    which objects of it are kept (`tenant`: only in tenant namespaces;
    `values`: only tenant-root's cozystack-values Secret; `all`)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    keep: str = "all"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def keeps(self, obj: dict) -> bool:
        meta = obj.get("metadata") or {}
        if self.keep == "tenant":
            return is_tenant_namespace(meta.get("namespace") or "")
        if self.keep == "tenant-namespace":
            return is_tenant_namespace(meta.get("name") or "")
        if self.keep == "values":
            return meta.get("namespace") == ROOT_NAMESPACE and meta.get("name") == VALUES_SECRET
        return True


WATCHED: tuple[Watched, ...] = (
    Watched("apps.cozystack.io", "v1alpha1", "Tenant", "tenants", True),
    Watched("apps.cozystack.io", "v1alpha1", "VMInstance", "vminstances", True),
    Watched("apps.cozystack.io", "v1alpha1", "KubernetesNodes", "kubernetesnodeses", True),
    Watched("apps.cozystack.io", "v1alpha1", "Kubernetes", "kuberneteses", True),
    Watched("cozystack.io", "v1alpha1", "GPUClass", "gpuclasses", False),
    Watched("", "v1", "ResourceQuota", "resourcequotas", True, "tenant"),
    Watched("", "v1", "Pod", "pods", True, "tenant"),
    Watched("kubevirt.io", "v1", "VirtualMachine", "virtualmachines", True, "tenant"),
    Watched("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances", True, "tenant"),
    Watched("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, "tenant"),
    Watched("", "v1", "Namespace", "namespaces", False, "tenant-namespace"),
    Watched("", "v1", "Secret", "secrets", True, "values"),
)


def state_export() -> str:
    """The one shell line that exports what `check` and `tree` read, as a
    YAML file for `--state` (CI, a GitOps job), generated from WATCHED: every
    kind across namespaces, then tenant-root's values Secret by name (never
    every Secret of the cluster). Help texts, error messages and the docs
    print this line; a test holds each of them to it."""
    listed = ",".join(watched.plural for watched in WATCHED if watched.keep != "values")
    values = next(watched for watched in WATCHED if watched.keep == "values")
    return (f"{{ kubectl get {listed} -A -o yaml; echo ---; kubectl get {values.plural[:-1]} {VALUES_SECRET} "
            f"-n {ROOT_NAMESPACE} --ignore-not-found -o yaml; }}")


# What `catalog` reads: the GPU classes and where their devices are (Nodes'
# allocatable, the Pods holding them; the DRA DeviceClasses, ResourceSlices and the
# ResourceClaims holding their devices), for the catalog's free units.
CATALOG_READS = ("nodes", "pods", "gpuclasses", "deviceclasses", "resourceslices", "resourceclaims")


def catalog_export() -> str:
    """The one kubectl line that exports what `catalog` reads (help, messages, docs)."""
    return f"kubectl get {','.join(CATALOG_READS)} -A -o yaml"


_RESOURCES: dict[Watched, type] = {}


def resource(watched: Watched):
    """The lightkube resource class of `watched`: a generic resource (objects
    are plain dicts), made once and kept out of lightkube's registry, where
    the core kinds already have typed classes."""
    found = _RESOURCES.get(watched)
    if found is None:
        from lightkube.generic_resource import GenericGlobalResource, GenericNamespacedResource, create_api_info

        base = GenericNamespacedResource if watched.namespaced else GenericGlobalResource
        info = create_api_info(watched.group, watched.version, watched.kind, watched.plural)
        found = _RESOURCES[watched] = type(watched.kind, (base,), {"_api_info": info})
    return found


def list_scope(watched: Watched) -> dict:
    """The namespace and field selector to list and watch `watched` with: the
    values Secret by name in tenant-root (RBAC grants that one Secret only),
    everything else across namespaces."""
    if watched.keep == "values":
        return {"namespace": ROOT_NAMESPACE, "fields": {"metadata.name": VALUES_SECRET}}
    return {"namespace": "*"} if watched.namespaced else {}


class ClientError(Exception):
    """No usable cluster configuration; str() says why in one line."""


def make_client(kubeconfig: str | None = None, context: str | None = None, timeout: float = 10.0):
    """A lightkube Client from `kubeconfig` (and `context`), else the
    in-cluster service account, else the default kubeconfig."""
    import httpx2
    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.core.exceptions import ConfigError

    try:
        if kubeconfig:
            config = KubeConfig.from_file(kubeconfig).get(context_name=context)
        elif context:
            config = KubeConfig.from_env().get(context_name=context)
        else:
            config = KubeConfig.from_env().get()
    except (ConfigError, OSError, ValueError, KeyError, TypeError) as err:
        raise ClientError(f"cannot use the cluster configuration{' ' + kubeconfig if kubeconfig else ''}: "
                          f"{err}") from None
    return Client(config, timeout=httpx2.Timeout(timeout), field_manager="cozyrender")


def plain(obj) -> dict:
    """A lightkube object as a plain dict."""
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def list_kind(client, watched: Watched, chunk_size: int = 500) -> tuple[list[dict], str]:
    """Every kept object of `watched` and the list's resourceVersion."""
    listing = client.list(resource(watched), chunk_size=chunk_size, **list_scope(watched))
    objects = []
    for item in listing:
        obj = plain(item)
        obj.setdefault("apiVersion", watched.api_version)
        obj.setdefault("kind", watched.kind)
        if watched.keeps(obj):
            objects.append(obj)
    try:
        version = listing.resourceVersion
    except Exception:  # an empty list never started iterating
        version = ""
    return objects, version


def stored_object(client, identity: tuple) -> dict | None:
    """The object of `identity` (group, kind, namespace, name) as the API
    server holds it now (a quorum read), None when it has none; ApiError
    for any other answer."""
    from lightkube.core.exceptions import ApiError

    group, kind, namespace, name = identity
    watched = next(w for w in WATCHED if (w.group, w.kind) == (group, kind))
    try:
        return plain(client.get(resource(watched), name, namespace=namespace if watched.namespaced else None))
    except ApiError as err:
        if err.status is not None and err.status.code == 404:
            return None
        raise


def read_state(client) -> list[dict]:
    """Every object `cozyrender check` reads, listed from the cluster: apps
    Tenants, VMInstances, KubernetesNodes and Kuberneteses, GPUClasses,
    ResourceQuotas, Pods, KubeVirt VirtualMachines and
    VirtualMachineInstances and DRA ResourceClaims in tenant namespaces, tenant Namespaces and
    tenant-root's `cozystack-values` Secret. A kind the cluster does not
    serve (404) is skipped: the state then holds none of it."""
    from lightkube.core.exceptions import ApiError

    objects: list[dict] = []
    for watched in WATCHED:
        try:
            objects.extend(list_kind(client, watched)[0])
        except ApiError as err:
            if err.status.code != 404:
                raise
    return objects


def iter_watched() -> Iterator[Watched]:
    return iter(WATCHED)
