"""A corpus of GPUClass creates and updates, valid, invalid and hostile, for
comparing `cozyrender gpuclass validate` with the real API server (the oracle).

Each case is (id, old or None, new): old None is a create; otherwise old is
created first and new replaces it. Built from the three valid classes in
tests/data/gpuclass by one change each (fields set, removed, retyped;
names; quantities at every boundary the rules and the server's int64 care
about; immutable fields changed; NUL bytes; huge numbers), plus a few
changes combined. Names are given per case by the caller (`name_for`), so
every case creates its own object; only the name cases keep theirs.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent / "data" / "gpuclass"
BASES = {stem: yaml.safe_load((DATA / f"{stem}.yaml").read_text()) for stem in ("passthrough", "vgpu", "mig")}

_DELETE = object()


def _with(obj: dict, path: str, value) -> dict:
    obj = copy.deepcopy(obj)
    keys = path.split(".")
    cursor = obj
    for key in keys[:-1]:
        cursor = cursor[int(key)] if isinstance(cursor, list) else cursor.setdefault(key, {})
    last = keys[-1]
    if value is _DELETE:
        if isinstance(cursor, list):
            del cursor[int(last)]
        else:
            cursor.pop(last, None)
    elif isinstance(cursor, list):
        cursor[int(last)] = value
    else:
        cursor[last] = value
    return obj


MEMORY = [
    40, 1, 0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, 1.5, 0.0, True, None, [], {},
    "40Gi", "1", "0", "-1", "0Gi", "-40Gi", "+40Gi", "40gi", "40G", "40e3", "40E3", "4e-3", "1m", "0.5", ".5",
    "1.", "1.5Gi", "0.000000001", "1n", "1u", "999999999999999999999999999Ei", "9223372036854775807",
    "9223372036854775808", "1Ei", "8Ei", "9Ei", "abc", "", " 40Gi", "40Gi ", "4 0Gi", "40Gi\x00", "\x0040Gi",
    "1" * 64, "1" * 65, "0x10", "1_000", "∞", "NaN", "Infinity", "1e308", "1e9999", "1E-9999",
]

NAMES = [
    "a", "a100-40g", "A100", "a_100", "a.100", "-a100", "a100-", "a" * 63, "a" * 64, "a" * 253, "0", "9gpu",
    "gpu--x", "a\x00b", "ü100", "a100 ", "gpuclass.cozystack.io",
]

RESOURCE_NAMES = [
    "nvidia.com/gpu", "gpu", "nvidia.com/GA100_A100_PCIE_40GB", "nvidia.com/a" + "b" * 62, "nvidia.com/a" + "b" * 63,
    "a" * 253 + "/x", "a" * 254 + "/x", "Nvidia.com/gpu", "nvidia.com/", "/gpu", "nvidia.com/gpu/x", "nvidia.com/-gpu",
    "nvidia.com/gpu_", "nvidia.com/g.p-u_1", "gpuclass.cozystack.io/devices", "a100.gpuclass.cozystack.io/devices",
    "GPUCLASS.COZYSTACK.IO/x", "x.GpuClass.Cozystack.Io/devices", "notgpuclass.cozystack.io/x",
    "gpuclass.cozystack.io.example.com/x", "nvidia.com/gpu\x00", "", "nvidia.com/" + "x" * 400,
]

STRING_FIELDS = ["vendor", "model", "profile"]


def _string_values() -> list:
    return ["x", "", "a" * 63, "a" * 64, "NVIDIA\x00", 7, None, ["NVIDIA"], "Ñvidia", " "]


def cases() -> list[tuple[str, dict | None, dict]]:
    out: list[tuple[str, dict | None, dict]] = []
    for stem, base in BASES.items():
        out.append((f"{stem}/create", None, base))
        out.append((f"{stem}/update-unchanged", base, base))
        for index, memory in enumerate(MEMORY):
            out.append((f"{stem}/memory-{index}", None, _with(base, "spec.memory", memory)))
        for field in ["vendor", "model", "mode", "memory", "sourceKind", "resourceName", "profile", "license",
                      "tolerations"]:
            out.append((f"{stem}/without-{field}", None, _with(base, f"spec.{field}", _DELETE)))
        for field in STRING_FIELDS:
            for index, value in enumerate(_string_values()):
                out.append((f"{stem}/{field}-{index}", None, _with(base, f"spec.{field}", value)))
        for mode in ["passthrough", "vgpu", "mig", "Passthrough", "", "gpu"]:
            out.append((f"{stem}/mode-{mode or 'empty'}", None, _with(base, "spec.mode", mode)))
        for source in ["PCIHostDevice", "MediatedDevice", "pci", ""]:
            out.append((f"{stem}/source-{source or 'empty'}", None, _with(base, "spec.sourceKind", source)))
        out.append((f"{stem}/unknown-field", None, _with(base, "spec.colour", "green")))
        out.append((f"{stem}/unknown-top-field", None, _with(base, "extra", {"a": 1})))
        out.append((f"{stem}/spec-string", None, _with(base, "spec", "gpu")))
        out.append((f"{stem}/spec-null", None, _with(base, "spec", None)))
        out.append((f"{stem}/no-spec", None, _with(base, "spec", _DELETE)))
    passthrough, vgpu, mig = BASES["passthrough"], BASES["vgpu"], BASES["mig"]
    for index, name in enumerate(NAMES):
        out.append((f"name-{index}", None, _with(passthrough, "metadata.name", name)))
    for index, resource in enumerate(RESOURCE_NAMES):
        out.append((f"resource-{index}", None, _with(passthrough, "spec.resourceName", resource)))
    tolerations = [
        [{"operator": "Exists"}], [{"operator": "Exists", "value": "x"}], [{"operator": "Exists", "value": ""}],
        [{"key": "", "operator": "Equal"}], [{"value": "x"}], [{"key": "k"}],
        [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 30}],
        [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30}], [{"key": "k", "tolerationSeconds": 30}],
        [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 2**63}],
        [{"key": "k", "effect": "NoExecute", "tolerationSeconds": -1}],
        [{"key": "k", "effect": "Sometimes"}], [{"key": "k", "operator": "In"}], [{"key": "k" * 318}],
        [{"key": "k", "value": "v" * 64}], [{"key": f"k{i}"} for i in range(32)], [{"key": f"k{i}"} for i in range(33)],
        [], None, "all", [None], [{"key": "k", "extra": 1}],
    ]
    for index, value in enumerate(tolerations):
        out.append((f"tolerations-{index}", None, _with(passthrough, "spec.tolerations", value)))
    licenses = [
        {"secretRef": {"namespace": "ns", "name": "n"}, "featureType": 1},
        {"secretRef": {"namespace": "ns", "name": "n"}, "featureType": 3},
        {"secretRef": {"namespace": "ns", "name": "n"}, "featureType": "4"},
        {"secretRef": {"namespace": "ns", "name": "n"}, "featureType": 2**31},
        {"secretRef": {"namespace": "ns", "name": "n"}},
        {"featureType": 4},
        {"secretRef": {"namespace": "Bad_NS", "name": "n"}, "featureType": 4},
        {"secretRef": {"namespace": "ns", "name": "a.b.c"}, "featureType": 4},
        {"secretRef": {"namespace": "ns", "name": "-n"}, "featureType": 4},
        {"secretRef": {"namespace": "ns", "name": "n" * 254}, "featureType": 4},
        {"secretRef": {"namespace": "n" * 64, "name": "n"}, "featureType": 4},
        {},
    ]
    for index, value in enumerate(licenses):
        out.append((f"license-{index}", None, _with(vgpu, "spec.license", value)))
    out.append(("passthrough-with-license", None, _with(passthrough, "spec.license", licenses[0])))
    # Updates: every immutable field changed, respelled or added/removed, and the mutable ones.
    changes = [
        ("vendor", "AMD"), ("model", "H100"), ("mode", "vgpu"), ("memory", "80Gi"), ("memory", "40960Mi"),
        ("memory", 42949672960), ("sourceKind", "MediatedDevice"), ("profile", "1g.10gb"), ("profile", _DELETE),
        ("resourceName", "nvidia.com/other"), ("tolerations", _DELETE), ("tolerations", [{"operator": "Exists"}]),
        ("vendor", "NVIDIA\x00X"), ("memory", "40Gi\x00"), ("colour", "green"),
    ]
    for stem, base in (("passthrough", passthrough), ("mig", mig), ("vgpu", vgpu)):
        for index, (field, value) in enumerate(changes):
            out.append((f"{stem}/update-{index}-{field}", base, _with(base, f"spec.{field}", value)))
    out.append(("vgpu/update-license", vgpu, _with(vgpu, "spec.license.featureType", 2)))
    out.append(("vgpu/update-license-removed", vgpu, _with(vgpu, "spec.license", _DELETE)))
    out.append(("mig/update-mode-passthrough-profile-kept", mig, _with(mig, "spec.mode", "passthrough")))
    out.append(("passthrough/update-add-profile", passthrough, _with(passthrough, "spec.profile", "x")))
    out.append(("passthrough/update-to-invalid-memory", passthrough, _with(passthrough, "spec.memory", "-1")))
    return out


def name_for(case_id: str, obj: dict, index: int) -> dict:
    """`obj` under its own name (a name case keeps the name it tests)."""
    if case_id.startswith("name-"):
        return obj
    return _with(obj, "metadata.name", f"case-{index}")
