"""Reading GPUClass objects: the few accessors every GPU class rule shares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

GROUP = "cozystack.io"
KIND = "GPUClass"


def is_gpuclass(obj: Mapping) -> bool:
    """A GPUClass of the cozystack.io group, whatever its version."""
    api_version = obj.get("apiVersion") or ""
    return obj.get("kind") == KIND and api_version.partition("/")[0] == GROUP


def gpuclasses(objects: Iterable[Mapping]) -> list[Mapping]:
    return [obj for obj in objects if is_gpuclass(obj)]


def class_name(gpuclass: Mapping) -> str:
    return (gpuclass.get("metadata") or {}).get("name") or ""


def spec(gpuclass: Mapping) -> Mapping:
    return gpuclass.get("spec") or {}


def resource_name(gpuclass: Mapping) -> str:
    return spec(gpuclass).get("resourceName") or ""


def tolerations(gpuclass: Mapping) -> list[Mapping]:
    return list(spec(gpuclass).get("tolerations") or ())


def mode(gpuclass: Mapping) -> str:
    return spec(gpuclass).get("mode") or ""
