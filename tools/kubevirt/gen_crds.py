#!/usr/bin/env python3
"""Generate the kubevirt.io/v1 VirtualMachine and VirtualMachineInstance
CRDs the test clusters serve, from KubeVirt's published OpenAPI.

KubeVirt cannot run here (its Go modules, kubevirt.io/api and
kubevirt.io/kubevirt, are refused by the module proxy), so no virt-api or
virt-controller serves or acts on these kinds; the test clusters serve
them as CRDs instead, with KubeVirt's own schema: every `$ref` of
`api/openapi-spec/swagger.json` resolved in place, so the API server checks
every field as KubeVirt's types define it (the devices the budget rules
read, `spec.runStrategy`/`running`, the VMI's `spec.domain.devices`,
`status.phase`, owner references among them).

What is changed, and why (a CRD schema must be structural):
- descriptions and `default`s are dropped (KubeVirt defaults in its own
  mutating webhook, which does not run here);
- `int-or-string` strings, and quantities typed `[string, integer, number]`,
  become `x-kubernetes-int-or-string: true` (as Kubernetes' own CRDs write
  a Quantity);
- a nested ObjectMeta (a VM's `spec.template.metadata`) keeps its labels
  and annotations and preserves the rest, as KubeVirt's installed CRDs do;
  the root `metadata` is the API server's own;
- list and map merge annotations (`x-kubernetes-list-type` and the like)
  are dropped: a map list's keys must be required or defaulted in a CRD,
  which KubeVirt's OpenAPI does not promise;
- a type referring back to itself (none in the two kinds today) would be
  cut to an object preserving unknown fields.

Usage: gen_crds.py SWAGGER_JSON OUT_YAML --source "kubevirt/kubevirt@<commit> (<describe>)"
The output is written deterministically. Every test plane installs it
(tools/controlplane/cluster.py), so the API server's acceptance of it is
checked at each plane's start, and tests/test_webhook_doors_live.py writes
VirtualMachines and VirtualMachineInstances against it; no test regenerates
it (that needs the KubeVirt snapshot, which CI does not fetch).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

KINDS = (
    ("VirtualMachine", "virtualmachines", "vm", ["vms"], "v1.VirtualMachine"),
    ("VirtualMachineInstance", "virtualmachineinstances", "vmi", ["vmis"], "v1.VirtualMachineInstance"),
)
OBJECT_META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
DROPPED = ("description", "default", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
           "x-kubernetes-map-type", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key")
# Printer columns as KubeVirt's own CRDs show them.
COLUMNS = {
    "VirtualMachine": [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Status", "type": "string", "jsonPath": ".status.printableStatus"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
    ],
    "VirtualMachineInstance": [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "IP", "type": "string", "jsonPath": ".status.interfaces[0].ipAddress"},
        {"name": "NodeName", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
    ],
}


def structural(definitions: dict, schema: dict, stack: tuple[str, ...] = ()) -> dict:
    """`schema` with every $ref resolved and the changes above made."""
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.rpartition("/")[2]
        if name == OBJECT_META:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                   "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}
        if name in stack:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return structural(definitions, definitions[name], stack + (name,))
    out: dict = {}
    for key, value in schema.items():
        if key in DROPPED:
            continue
        if key == "properties":
            out[key] = {name: structural(definitions, sub, stack) for name, sub in sorted(value.items())}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = structural(definitions, value, stack)
        else:
            out[key] = value
    kinds = out.get("type")
    if out.get("format") == "int-or-string" or isinstance(kinds, list):
        # an IntOrString, or a Quantity typed [string, integer, number]: a CRD says it so
        out.pop("format", None)
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        out["x-kubernetes-int-or-string"] = True
    if "type" not in out and "x-kubernetes-int-or-string" not in out:
        out["type"] = "object"
        if "properties" not in out:
            out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def crd(definitions: dict, kind: str, plural: str, short: str, more: list[str], definition: str, source: str) -> dict:
    schema = structural(definitions, definitions[definition], (definition,))
    schema["properties"]["metadata"] = {"type": "object"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.kubevirt.io",
            "labels": {"app.kubernetes.io/part-of": "cozyrender-test-cluster"},
            "annotations": {"cozyrender.io/generated-from": source},
        },
        "spec": {
            "group": "kubevirt.io",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": [short, *more], "categories": ["all"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": COLUMNS[kind],
            }],
        },
    }


def generate(swagger: dict, source: str) -> str:
    definitions = swagger["definitions"]
    header = (f"# Generated by tools/kubevirt/gen_crds.py from KubeVirt's api/openapi-spec/swagger.json\n"
              f"# ({source}): KubeVirt's schema, descriptions and defaults dropped. Do not edit.\n")
    docs = [crd(definitions, *kind, source) for kind in KINDS]
    return header + "---\n".join(yaml.safe_dump(doc, sort_keys=True, width=120) for doc in docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("swagger", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", required=True, help="the repository and commit the swagger.json is from")
    args = parser.parse_args(argv)
    text = generate(json.loads(args.swagger.read_text()), args.source)
    args.out.write_text(text)
    print(f"{args.out}: {len(text)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
