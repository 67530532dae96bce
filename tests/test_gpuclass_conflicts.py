"""Class conflicts: the oldest class holds a shared resource name."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.gpuclass.conflicts import Conflict, find_conflicts, resource_holders


def gpuclass(name: str, resource: str, created: str | None) -> dict:
    metadata = {"name": name}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": metadata,
            "spec": {"resourceName": resource}}


def test_the_oldest_class_holds_and_newer_ones_are_in_conflict():
    classes = [
        gpuclass("typo", "nvidia.com/A100", "2026-03-01T00:00:00Z"),
        gpuclass("a100", "nvidia.com/A100", "2026-01-01T00:00:00Z"),
        gpuclass("h100", "nvidia.com/H100", "2026-02-01T00:00:00Z"),
    ]
    assert resource_holders(classes) == {"nvidia.com/A100": "a100", "nvidia.com/H100": "h100"}
    conflicts = find_conflicts(classes)
    assert conflicts == {"typo": Conflict("typo", "nvidia.com/A100", "a100")}
    assert "held by the older class 'a100'" in str(conflicts["typo"])


def test_name_order_breaks_a_tie_and_timezones_compare_as_instants():
    same = "2026-01-01T00:00:00Z"
    assert resource_holders([gpuclass("b", "r", same), gpuclass("a", "r", same)]) == {"r": "a"}
    # 01:00+02:00 is 23:00 the day before in UTC: older than midnight UTC.
    classes = [gpuclass("a", "r", "2026-01-01T00:00:00Z"), gpuclass("z", "r", "2026-01-01T01:00:00+02:00")]
    assert resource_holders(classes) == {"r": "z"}


def test_a_class_not_created_yet_is_the_newest():
    classes = [gpuclass("new", "r", None), gpuclass("zzz", "r", "2030-01-01T00:00:00Z")]
    assert find_conflicts(classes) == {"new": Conflict("new", "r", "zzz")}


names = st.text(alphabet="abc", min_size=1, max_size=3)
created_stamps = st.integers(min_value=0, max_value=5).map(lambda d: f"2026-01-0{d + 1}T00:00:00Z")


def lists_of_classes(stamps) -> st.SearchStrategy:
    return st.lists(
        st.builds(gpuclass, names, st.sampled_from(["r1", "r2", "r3"]), stamps),
        max_size=8, unique_by=lambda c: c["metadata"]["name"],
    )


class_lists = lists_of_classes(st.none() | created_stamps)
created_class_lists = lists_of_classes(created_stamps)


@settings(max_examples=200, deadline=None)
@given(class_lists)
def test_exactly_one_holder_per_resource_name(classes):
    holders = resource_holders(classes)
    conflicts = find_conflicts(classes)
    for resource in {c["spec"]["resourceName"] for c in classes}:
        free = [c["metadata"]["name"] for c in classes
                if c["spec"]["resourceName"] == resource and c["metadata"]["name"] not in conflicts]
        assert free == [holders[resource]]
    for conflict in conflicts.values():
        assert holders[conflict.resource_name] == conflict.holder != conflict.gpu_class


@settings(max_examples=200, deadline=None)
@given(created_class_lists, st.sampled_from(["r1", "r2", "r3"]), st.booleans())
def test_a_newer_class_never_takes_a_resource_name_from_its_holder(classes, resource, created):
    # Newer than every (created) class: created after all of them, or not created yet.
    newer = gpuclass("newcomer", resource, "2026-02-01T00:00:00Z" if created else None)
    before = resource_holders(classes)
    after = resource_holders(classes + [newer])
    assert {r: h for r, h in after.items() if r in before} == before


@settings(max_examples=100, deadline=None)
@given(class_lists, st.randoms())
def test_input_order_does_not_matter(classes, rng):
    shuffled = list(classes)
    rng.shuffle(shuffled)
    assert find_conflicts(shuffled) == find_conflicts(classes)


def test_a_timestamp_that_is_not_one_is_an_error_not_the_newest():
    import pytest

    from cozyrender.kube.shape import ShapeError

    for created in ("yesterday", "2026-13-01T00:00:00Z", "2026-01-01", 5):
        with pytest.raises(ShapeError, match=r"GPUClass b: metadata\.creationTimestamp is not an RFC 3339"):
            find_conflicts([gpuclass("a", "r/x", "2026-01-01T00:00:00Z"), gpuclass("b", "r/x", created)])
    # Absent (a class not created yet) is the newest; fractional seconds and offsets read.
    assert find_conflicts([gpuclass("a", "r/x", "2026-01-01T00:00:00.123456789Z"), gpuclass("b", "r/x", None)])["b"].holder == "a"
    assert resource_holders([gpuclass("a", "r/x", "2026-01-01T01:00:00+02:00"),
                             gpuclass("b", "r/x", "2026-01-01T00:00:00Z")]) == {"r/x": "a"}


def test_the_oldest_class_holds_a_shared_device_class_too():
    from cozyrender.gpuclass.classes import device_class_name

    old = gpuclass("a100", "nvidia.com/A100", "2026-01-01T00:00:00Z")
    new = gpuclass("a100-dra", "nvidia.com/A100-other", "2026-02-01T00:00:00Z")
    alone = gpuclass("h100", "nvidia.com/H100", "2026-03-01T00:00:00Z")
    for obj in (old, new):
        obj["spec"]["deviceClassName"] = "gpu.cozyrender.io"
    classes = [new, alone, old]
    assert resource_holders(classes, device_class_name) == {"gpu.cozyrender.io": "a100"}
    conflicts = find_conflicts(classes)
    assert conflicts == {"a100-dra": Conflict("a100-dra", "gpu.cozyrender.io", "a100", "DeviceClass")}
    assert "its DeviceClass 'gpu.cozyrender.io' is held by the older class 'a100'" in str(conflicts["a100-dra"])
