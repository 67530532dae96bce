"""The webhook registers its own configurations, once it can answer.

Rule: a ValidatingWebhookConfiguration or MutatingWebhookConfiguration that
fails closed must never exist while no replica can answer it, or every
checked write in the cluster stops. So the chart does not create them: it
renders them into a ConfigMap (`<release>-webhooks`, one key per
configuration), and each replica, only while it is ready (its cache synced
and the ledger read), applies them with server-side apply. Until the first
replica is ready nothing is registered and tenant writes go on unchecked,
exactly as before the install; a replica that never starts never registers
anything, and Helm's `--wait` reports the failed release.

- A replica registers only the configurations whose every webhook calls a
  path it serves (during an upgrade that turns Flux injection on, the old
  replicas, which serve no `/mutate`, leave the new MutatingWebhookConfiguration
  to the new ones). A configuration kind the ConfigMap no longer lists
  (injection turned off) is deleted, by name.
- Each registered configuration is owned (ownerReferences) by the chart's
  ClusterRole `<release>-read`: uninstalling the chart deletes that role, and
  the garbage collector deletes the configurations. Their RBAC goes with it,
  so a replica still terminating cannot register them again.
- With no caBundle in the rendered configuration (cert-manager mode), the CA
  that signed the serving certificate (`ca.crt` beside it, as cert-manager's
  Secret holds it) is filled in, read again at every pass: the Secret the
  kubelet keeps up to date is the source, never the file as it was when the
  replica started. The replicas are the only writer of that field: a
  configuration that asks cert-manager's cainjector to inject
  (`cert-manager.io/inject-ca-from`) is registered without the request, so the
  two never force-apply different bundles over each other (cainjector reacts
  to every change of the configuration, the replicas re-apply every pass).
- The DRA webhooks (ResourceClaims, ResourceClaimTemplates) are sent only
  the writes naming a GPU DeviceClass: the DeviceClasses the GPUClasses
  name (`spec.deviceClassName`) are known only in the cluster, so the chart
  renders their match condition `gpu-device-classes` as `false` and each
  replica writes it from the classes its cache holds (`device_class_condition`).
  A claim of any other DeviceClass is never sent, so an outage never blocks
  it. The replica looks at the classes every second (`DEVICE_CLASS_POLL`)
  and registers again at once when they name other DeviceClasses: a
  GPUClass naming a new DeviceClass leaves its claims unsent for about a
  second after the replicas see it.
- Registration is repeated every `interval` seconds while ready (an apply
  that changes nothing writes nothing): a configuration deleted by hand comes
  back once a replica is ready, which is how the "webhook down" runbook
  restores it. A replica that stops being ready never deregisters: the
  configuration fails closed, as designed.

This is the shell with I/O; `plan` decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import yaml

log = logging.getLogger("cozyrender.webhook.registration")

KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
FIELD_MANAGER = "cozyrender-webhook"
INTERVAL = 15.0
DEVICE_CLASS_POLL = 1.0  # seconds between looks at the DeviceClasses the GPUClasses name
# cert-manager's cainjector writes the caBundle of a configuration carrying this annotation.
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"


class RegistrationError(Exception):
    pass


@dataclass
class Plan:
    apply: list[dict] = field(default_factory=list)  # configurations to register, as sent
    delete: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) no longer listed
    skipped: list[str] = field(default_factory=list)  # listed, but calling a path this replica does not serve


def _paths(configuration: Mapping) -> set[str]:
    paths = set()
    for hook in configuration.get("webhooks") or []:
        client = hook.get("clientConfig") or {}
        if client.get("url"):
            paths.add(urlsplit(client["url"]).path or "/")
        else:
            paths.add((client.get("service") or {}).get("path") or "/")
    return paths


def read_configurations(data: Mapping[str, str]) -> list[dict]:
    """The configurations a `<release>-webhooks` ConfigMap's data holds."""
    found = []
    for key in sorted(data):
        try:
            docs = [doc for doc in yaml.safe_load_all(data[key]) if doc]
        except yaml.YAMLError as err:
            raise RegistrationError(f"key {key}: not YAML ({err})") from None
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") not in KINDS or \
                    not isinstance((doc.get("metadata") or {}).get("name"), str):
                raise RegistrationError(f"key {key}: not a named webhook configuration")
            found.append(doc)
    return found


# The match condition of the DRA webhooks this module writes, and where each kind's devices are.
DEVICE_CLASSES_CONDITION = "gpu-device-classes"
CLAIM_SPECS = {"resourceclaims": "object.spec", "resourceclaimtemplates": "object.spec.spec"}


def device_class_condition(resource: str, device_classes: Iterable[str]) -> str:
    """The CEL match condition sending a write of `resource` (resourceclaims
    or resourceclaimtemplates) only when a request or an alternative names
    one of `device_classes`; `false` when there is none."""
    names = sorted(set(device_classes))
    if not names:
        return "false"
    listed = "[" + ", ".join("'" + name + "'" for name in names) + "]"  # DNS subdomains: no quote to escape
    spec = CLAIM_SPECS[resource]
    return (f"has({spec}.devices) && has({spec}.devices.requests) && {spec}.devices.requests.exists(r, "
            f"(has(r.exactly) && r.exactly.deviceClassName in {listed}) || "
            f"(has(r.firstAvailable) && r.firstAvailable.exists(s, s.deviceClassName in {listed})))")


def _fill_device_classes(obj: dict, device_classes: Iterable[str]) -> None:
    for hook in obj.get("webhooks") or []:
        for condition in hook.get("matchConditions") or []:
            if condition.get("name") != DEVICE_CLASSES_CONDITION:
                continue
            resources = {r for rule in hook.get("rules") or [] for r in rule.get("resources") or []}
            resource = next(iter(resources)) if len(resources) == 1 else None
            if resource not in CLAIM_SPECS:
                raise RegistrationError(f"webhook {hook.get('name')}: condition {DEVICE_CLASSES_CONDITION} needs "
                                        f"one rule resource of {', '.join(CLAIM_SPECS)}")
            condition["expression"] = device_class_condition(resource, device_classes)


def plan(configurations: Iterable[Mapping], served: Iterable[str], owner: Mapping | None,
         ca_bundle: str | None, device_classes: Iterable[str] = ()) -> Plan:
    """What one replica does: register what it serves (the DRA webhooks'
    condition written from `device_classes`), delete the kinds no longer listed."""
    served = set(served)
    result = Plan()
    listed = list(configurations)
    for configuration in listed:
        name = configuration["metadata"]["name"]
        if not _paths(configuration) <= served:
            result.skipped.append(f"{configuration['kind']} {name}")
            continue
        obj = yaml.safe_load(yaml.safe_dump(dict(configuration)))  # a deep copy
        meta = obj["metadata"]
        annotations = meta.get("annotations") or {}
        if INJECT_CA_FROM in annotations:  # one writer of caBundle: the replicas
            annotations = {k: v for k, v in annotations.items() if k != INJECT_CA_FROM}
            if annotations:
                meta["annotations"] = annotations
            else:
                meta.pop("annotations")
        if owner is not None:
            meta["ownerReferences"] = [dict(owner)]
        if ca_bundle:
            for hook in obj.get("webhooks") or []:
                hook.setdefault("clientConfig", {}).setdefault("caBundle", ca_bundle)
        _fill_device_classes(obj, device_classes)
        result.apply.append(obj)
    names = {c["metadata"]["name"] for c in listed}
    kinds = {c["kind"] for c in listed}
    result.delete = [(kind, name) for kind in KINDS if kind not in kinds for name in sorted(names)]
    return result


def _resource(kind: str):
    from lightkube.resources.admissionregistration_v1 import (
        MutatingWebhookConfiguration,
        ValidatingWebhookConfiguration,
    )

    return {"ValidatingWebhookConfiguration": ValidatingWebhookConfiguration,
            "MutatingWebhookConfiguration": MutatingWebhookConfiguration}[kind]


class Registrar:
    """Applies `plan` from the ConfigMap while `ready()` holds."""

    def __init__(self, client, namespace: str, configmap: str, owner_role: str, served: Iterable[str],
                 ready: Callable[[], bool], ca_bundle: str | Callable[[], str | None] | None = None,
                 interval: float = INTERVAL, metrics=None,
                 device_classes: Callable[[], Iterable[str]] = lambda: ()) -> None:
        self.client = client
        self.namespace, self.configmap, self.owner_role = namespace, configmap, owner_role
        self.served = tuple(served)
        self.ready = ready
        self.ca_bundle = ca_bundle
        self.interval = interval
        self.metrics = metrics
        self.device_classes = device_classes
        self.applied_classes: tuple[str, ...] | None = None  # the DeviceClasses the last pass wrote
        self.registered: list[str] = []
        self.listed: set[str] = set()  # the kinds the ConfigMap listed at the last pass
        self.webhooks: set[str] = set()  # the webhooks (by name) it listed
        self.last_error = ""

    def _owner(self) -> dict | None:
        from lightkube import ApiError
        from lightkube.resources.rbac_authorization_v1 import ClusterRole

        try:
            role = self.client.get(ClusterRole, self.owner_role)
        except ApiError as err:
            if err.status.code == 404:
                return None  # being uninstalled: register nothing
            raise
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": role.metadata.name,
                "uid": role.metadata.uid, "blockOwnerDeletion": False}

    def sync(self) -> Plan | None:
        """One registration pass; None when the chart is gone (nothing to do)."""
        from lightkube import ApiError
        from lightkube.resources.core_v1 import ConfigMap
        from lightkube.types import PatchType

        try:
            source = self.client.get(ConfigMap, self.configmap, namespace=self.namespace)
        except ApiError as err:
            if err.status.code == 404:
                self.listed, self.webhooks = set(), set()
                return None
            raise
        owner = self._owner()
        if owner is None:
            self.listed, self.webhooks = set(), set()
            return None
        configurations = read_configurations(source.data or {})
        self.listed = {c["kind"] for c in configurations}
        self.webhooks = {hook.get("name") for c in configurations for hook in c.get("webhooks") or []}
        ca_bundle = self.ca_bundle() if callable(self.ca_bundle) else self.ca_bundle
        device_classes = tuple(sorted(set(self.device_classes())))
        decided = plan(configurations, self.served, owner, ca_bundle, device_classes)
        for obj in decided.apply:
            self.client.patch(_resource(obj["kind"]), obj["metadata"]["name"], obj, patch_type=PatchType.APPLY,
                              field_manager=FIELD_MANAGER, force=True)
        for kind, name in decided.delete:
            try:
                self.client.delete(_resource(kind), name)
                log.info("cozyrender webhook: deleted %s %s (no longer in ConfigMap %s/%s)", kind, name,
                            self.namespace, self.configmap)
            except ApiError as err:
                if err.status.code != 404:
                    raise
        registered = [f"{obj['kind']} {obj['metadata']['name']}" for obj in decided.apply]
        if registered != self.registered:
            log.info("cozyrender webhook: registered %s", ", ".join(registered) or "nothing")
        self.registered = registered
        self.applied_classes = device_classes
        return decided

    def run(self, stop: threading.Event) -> None:
        """Register whenever ready, every `interval` seconds (every second
        while nothing is registered, and at once when the GPUClasses name
        other DeviceClasses), until `stop`."""
        last = None
        while not stop.is_set():
            due = last is None or not self.registered or time.monotonic() - last >= self.interval or \
                tuple(sorted(set(self.device_classes()))) != self.applied_classes
            if due and self.ready():
                last = time.monotonic()
                try:
                    self.sync()
                    self.last_error = ""
                    if self.metrics is not None:
                        self.metrics.registrations.labels("ok").inc()
                except Exception as err:  # retried next interval; the reason is logged and kept
                    self.last_error = f"{type(err).__name__}: {err}"
                    log.warning("cozyrender webhook: registering the webhook configurations failed: %s",
                                self.last_error)
                    if self.metrics is not None:
                        self.metrics.registrations.labels("error").inc()
            stop.wait(min(self.interval, DEVICE_CLASS_POLL))

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="webhook-registration", daemon=True)
        thread.start()
        return thread


def ca_bundle_file(path: str) -> Callable[[], str | None]:
    """A reader of the base64 PEM CA at `path`, read at each call (None while it is missing or
    holds no certificate): the Secret volume the kubelet updates when cert-manager renews."""
    import base64

    def read() -> str | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        return base64.b64encode(data).decode() if b"BEGIN CERTIFICATE" in data else None

    return read


__all__ = ["CLAIM_SPECS", "DEVICE_CLASSES_CONDITION", "FIELD_MANAGER", "INJECT_CA_FROM", "INTERVAL", "KINDS", "Plan",
           "Registrar", "RegistrationError", "ca_bundle_file", "device_class_condition", "plan",
           "read_configurations"]
