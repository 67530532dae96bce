"""Reading GPUClass objects: the few accessors every GPU class rule shares.

Fields are read through `cozyrender.kube.shape`: a class whose spec is not
an object, or whose resource name or tolerations have the wrong type, is a
ShapeError naming the class and the field, never read as empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cozyrender.kube.shape import ShapeError, got, mapping, mappings, name_of, string

GROUP = "cozystack.io"
KIND = "GPUClass"
_TOLERATION_FIELDS = ("key", "operator", "value", "effect")


def is_gpuclass(obj: Mapping) -> bool:
    """A GPUClass of the cozystack.io group, whatever its version."""
    api_version = obj.get("apiVersion")
    return obj.get("kind") == KIND and isinstance(api_version, str) and api_version.partition("/")[0] == GROUP


def identity_group(obj: Mapping) -> str:
    """The group an object is known by: a GPUClass goes by the group the class
    readers go by (`cozystack.io/v1/x` is a GPUClass to them), so two classes
    of one name meet whatever their spelling; any other object by its
    apiVersion's group."""
    if is_gpuclass(obj):
        return GROUP
    api_version = obj.get("apiVersion")
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def gpuclasses(objects: Iterable[Mapping]) -> list[Mapping]:
    return [obj for obj in objects if is_gpuclass(obj)]


def class_name(gpuclass: Mapping) -> str:
    """`metadata.name`, required."""
    return name_of(gpuclass)


def spec(gpuclass: Mapping) -> Mapping:
    return mapping(gpuclass, "spec", gpuclass)


def text(gpuclass: Mapping, key: str) -> str:
    """A string field of the spec ("" when absent)."""
    return string(spec(gpuclass), key, gpuclass, "spec") or ""


def resource_name(gpuclass: Mapping) -> str:
    return text(gpuclass, "resourceName")


def device_class_name(gpuclass: Mapping) -> str:
    """`spec.deviceClassName`: the DRA DeviceClass whose devices are the
    class's ("" when the class is offered through its resourceName only)."""
    return text(gpuclass, "deviceClassName")


def mode(gpuclass: Mapping) -> str:
    return text(gpuclass, "mode")


def memory(gpuclass: Mapping) -> str:
    """`spec.memory` as written: a quantity is a string or a YAML number."""
    value = spec(gpuclass).get("memory")
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ShapeError.at(gpuclass, "spec.memory", f"is not a quantity (got {got(value)})")


def tolerations(gpuclass: Mapping) -> list[Mapping]:
    """`spec.tolerations`, each a map whose matched fields are strings."""
    found = mappings(spec(gpuclass), "tolerations", gpuclass, "spec")
    for index, toleration in enumerate(found):
        for key in _TOLERATION_FIELDS:
            string(toleration, key, gpuclass, f"spec.tolerations[{index}]")
    return list(found)
