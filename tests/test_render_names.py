"""The name rules of cozyrender.render (issue 12 item 5), checked against the
real implementations they restate: Helm's own release-name check (the SDK's
validate_release_name) and the GPUClass CRD's CEL rule for a DNS-1123 label
(run on cel-expr-python), over generated names, an attacker's included."""

from __future__ import annotations

import helm_python
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.gpuclass.validation import validate_gpuclass
from cozyrender.render import DNS1123_LABEL_MAX, RELEASE_NAME_MAX, RenderError, check_names, name_problem

# Names near the rules' edges: the right alphabet, dots and dashes at the ends, upper case,
# lengths around the limits, and anything else (unicode digits, NUL, newlines).
ALPHABET = st.sampled_from("abz09-.A_\n\x00٣é")
NAMES = st.one_of(
    st.text(ALPHABET, min_size=0, max_size=70),
    st.builds(lambda n, c: c * n, st.integers(50, 70), st.sampled_from("a0")),
    st.text(max_size=20),
)


# Both references read a name as a C string, cut at the first NUL: the SDK accepts
# "ok\x00BAD" as a release name and the CRD's CEL rule passes it as a label (see the
# test below). The cross-checks therefore compare names without NUL.
NO_NUL = NAMES.filter(lambda name: "\x00" not in name)


def helm_accepts(name: str) -> bool:
    try:
        helm_python.validate_release_name(name)
    except helm_python.HelmError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(NO_NUL)
def test_release_rule_is_helms(name):
    assert (name_problem(name, "release") is None) == helm_accepts(name)


GPUCLASS = {
    "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass",
    "spec": {"vendor": "NVIDIA", "model": "L4", "mode": "passthrough", "memory": "24Gi",
             "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/L4"},
}


def crd_accepts_as_label(name: str) -> bool:
    result = validate_gpuclass({**GPUCLASS, "metadata": {"name": name}})
    return not any("DNS-1123 label" in v.message for v in result.violations)


@settings(max_examples=150, deadline=None)
@given(NO_NUL.filter(bool))  # an empty name is refused by the API server before any CEL rule
def test_namespace_rule_is_the_crds_dns1123_label(name):
    assert (name_problem(name, "namespace") is None) == crd_accepts_as_label(name)


@given(NAMES, NAMES)
def test_check_names_refuses_exactly_the_bad_ones_and_names_the_rule(release, namespace):
    problems = [p for p in (name_problem(namespace, "namespace"), name_problem(release, "release")) if p]
    try:
        check_names(release, namespace)
    except RenderError as err:
        message = str(err)
        assert problems and message == problems[0]
        assert "\n" not in message  # one line, whatever the name holds
        assert ("DNS-1123" in message or "at most" in message or "empty" in message)
    else:
        assert not problems
        assert len(namespace) <= DNS1123_LABEL_MAX and len(release) <= RELEASE_NAME_MAX


def test_a_nul_never_passes_although_the_references_cut_there():
    for what in ("release", "namespace"):
        assert "is not a DNS-1123" in name_problem("ok\x00BAD", what)
