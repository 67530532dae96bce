"""The GPUClass CRD ships with charts/cozystack-basics: rendered by Helm with
--include-crds, a valid apiextensions/v1 CustomResourceDefinition, and a
structural schema whose rules agree with cozyrender's own key rules."""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.kube.cel.environment import CompiledRule
from cozyrender.gpuclass.validation import CRD_PATH
from cozyrender.keys import in_budget_domain, is_class_name

CRD_NAME = "gpuclasses.cozystack.io"


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD_PATH.read_text())


def _schema(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _rules(schema: dict, path: str) -> list[str]:
    node = schema
    for step in path.split(".") if path else ():
        node = node["properties"][step]
    return [entry["rule"] for entry in node.get("x-kubernetes-validations", [])]


def test_helm_renders_the_crd_with_the_chart(helm4, repo_root):
    rendered = subprocess.run(
        [str(helm4), "template", "cozystack-basics", str(repo_root / "charts" / "cozystack-basics"),
         "--include-crds", "--namespace", "cozy-system"],
        check=True, capture_output=True, text=True,
    ).stdout
    crds = [doc for doc in yaml.safe_load_all(rendered)
            if doc and doc.get("kind") == "CustomResourceDefinition"]
    assert [doc["metadata"]["name"] for doc in crds] == [CRD_NAME]
    assert crds[0] == yaml.safe_load(CRD_PATH.read_text())


def test_the_crd_is_a_valid_apiextensions_v1_crd(crd):
    kubernetes_validate.validate(crd, "1.35.0", strict=True)
    broken = yaml.safe_load(CRD_PATH.read_text())
    broken["spec"]["versions"] = {"v1alpha1": True}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.35.0", strict=True)


def test_the_crd_names_and_scope(crd):
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}" == CRD_NAME
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == ("cozystack.io", "Cluster", "GPUClass")
    assert [v["name"] for v in spec["versions"] if v["storage"]] == ["v1alpha1"]
    columns = {c["name"]: c["jsonPath"] for c in spec["versions"][0]["additionalPrinterColumns"]}
    assert columns["Resource"] == ".spec.resourceName" and columns["Age"] == ".metadata.creationTimestamp"


def _structural_problems(schema: dict, path: str = "") -> list[str]:
    """The structural-schema conditions Kubernetes enforces on a CRD that
    the shipped file could break: a type on every node (except int-or-string,
    which carries exactly anyOf integer/string), and no additionalProperties
    beside properties."""
    problems = []
    if schema.get("x-kubernetes-int-or-string"):
        if "type" in schema or schema.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{path}: int-or-string must be typeless with anyOf integer/string")
    elif "type" not in schema:
        problems.append(f"{path}: no type")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: properties and additionalProperties")
    for name, sub in schema.get("properties", {}).items():
        problems += _structural_problems(sub, f"{path}.{name}")
    if "items" in schema:
        problems += _structural_problems(schema["items"], f"{path}[*]")
    return problems


def test_the_schema_is_structural_and_strings_are_bounded_for_cel_cost(crd):
    schema = _schema(crd)
    assert _structural_problems(schema) == []
    spec = schema["properties"]["spec"]
    assert "nodeSelector" not in spec["properties"]  # a class's nodes advertise its resource
    for name, sub in spec["properties"].items():
        if sub.get("type") == "string" and "enum" not in sub:
            assert "maxLength" in sub, name


# -- the CEL rules agree with cozyrender.keys, the single implementation elsewhere --

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefgpuclasozyti.-/AGZ0123456789", max_size=40)
       | st.sampled_from(["gpuclass.cozystack.io/x", "a.gpuclass.cozystack.io/devices",
                          "GPUCLASS.cozystack.IO/devices", "x/gpuclass.cozystack.io/y"]))
def test_the_budget_domain_rule_agrees_with_keys(crd, resource):
    rule = CompiledRule(_rules(_schema(crd), "spec.resourceName")[1])
    assert rule.holds(resource) is not in_budget_domain(resource)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab09-_.A", max_size=70) | st.sampled_from(["a" * 63, "a" * 64]))
def test_the_name_rule_agrees_with_keys(crd, name):
    rule = CompiledRule(_rules(_schema(crd), "")[0])
    assert rule.holds({"metadata": {"name": name}}) is is_class_name(name)


def _all_rules(schema: dict, path: str = "") -> list[tuple[str, str]]:
    found = [(path, entry["rule"]) for entry in schema.get("x-kubernetes-validations", [])]
    for name, sub in schema.get("properties", {}).items():
        found += _all_rules(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        found += _all_rules(schema["items"], f"{path}[*]")
    return found


def test_every_shipped_rule_compiles_as_the_api_server_declares_cel(crd):
    """Each rule type-checks with self typed from its schema node and the
    libraries declared as the 1.35 API server declares them (the
    validator compiles them that way; this names each rule)."""
    from cozyrender.kube.cel.environment import TypedScope
    from cozyrender.kube.cel.types import decl_type
    from cozyrender.gpuclass.validation import CRDValidator

    validator = CRDValidator(crd)
    shipped = _all_rules(_schema(crd))
    assert sorted(rule.text for rule in validator.rules()) == sorted(rule for _, rule in shipped)
    assert len(shipped) == 20  # spec.deviceClassName added its rule (issue 32 item 4)
    root = decl_type(_schema(crd), resource_root=True)
    scope = TypedScope([root])
    fields = dict(root.fields)
    assert dict(fields["metadata"].fields).keys() == {"name", "generateName"}
    memory_rules = [rule for path, rule in shipped if path == "spec.memory"]
    assert any("sign(quantity(self)) == 1" in rule for rule in memory_rules)
    spec_type = fields["spec"]
    for rule in memory_rules:
        CompiledRule(rule, scope, dict(spec_type.fields)["memory"])


@pytest.mark.parametrize("rule,where,reason", [
    ("quantity(self).sign() == 1", "memory", "found no matching overload|undeclared reference to 'sign'"),
    ("self.noSuchField == 'x'", "", "undefined field"),
    ("self.mode == 1", "", "no matching overload"),
    ("self.featureType == 'one'", "license", "no matching overload"),
    ("self.tolerations.size() > 0 && self.tolerations[0].tolerationSeconds == 'x'", "", "no matching overload"),
    ("self.metadata.namespace == 'x'", "<root>", "undefined field"),
])
def test_a_rule_the_api_server_would_refuse_fails_the_offline_check(crd, rule, where, reason):
    """Typed from the schema, as at CRD creation: an undeclared field or a
    type mismatch does not compile (with self dyn, both would have)."""
    from cozyrender.kube.cel.environment import RuleCompileError
    from cozyrender.gpuclass.validation import CRDValidator

    broken = yaml.safe_load(CRD_PATH.read_text())
    schema = _schema(broken)
    node = schema if where == "<root>" else schema["properties"]["spec"]
    if where not in ("", "<root>"):
        node = node["properties"][where]
    node.setdefault("x-kubernetes-validations", []).append({"rule": rule, "message": "x"})
    with pytest.raises(RuleCompileError, match=reason):
        CRDValidator(broken)
