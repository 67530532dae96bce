"""`cozyrender check` against a tenant administrator's moves, after issue 11:
one regression test per finding of the adversarial review (each through the
CLI), then the attacks that held, as properties."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_budgets_builders import as_listed, classes, klist, run_check, tenant, vm, write_json

from cozyrender.commands.check import command

A100 = "a100.gpuclass.cozystack.io/devices"


def _invoke(*args: str):
    return CliRunner().invoke(command, list(args))


def _bad_input(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.output.startswith("cozyrender check: error: ") and result.output.count("\n") == 1, result.output
    for text in expected:
        assert text in result.output, (text, result.output)


# -- finding 1: copies equal only under Python's `==` -------------------------------

@pytest.mark.parametrize("other", [True, 1.0], ids=["true", "1.0"])
@pytest.mark.parametrize("order", ["one first", "other first"])
def test_copies_equal_only_as_python_values_are_two_different_copies_in_any_order(tmp_path, other, order):
    """`1`, `1.0` and `true` are equal to Python but not to the rules (a budget
    of `true` counts as 0, a count of `1.0` is bad input): two copies that
    differ only so were one object, and which copy was read first decided
    between admitted and refused."""
    one = tenant("a", quotas={A100: 1})
    two = dict(tenant("a", quotas={A100: other}), apiVersion="apps.cozystack.io/v1beta1")
    copies = [one, two] if order == "one first" else [two, one]
    result = run_check(tmp_path, [*classes(), *copies], vm("tenant-a", "v", [{"class": "a100", "count": 1}]))
    _bad_input(result, "two different copies of one object (Tenant apps.cozystack.io")


# -- finding 2: aliases that expand without bound, or refer to themselves -----------

def _laughs(levels: int) -> str:
    """A billion-laughs block: each anchor a list of ten aliases to the one before."""
    lines = ["  k0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  k{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


TENANT_HEAD = "apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata: {name: b, namespace: tenant-a}\n"


@pytest.mark.parametrize("where", ["state", "write"])
def test_aliases_expanding_to_a_billion_nodes_are_bad_input(tmp_path, where):
    """Ten aliases per level, nine levels: a few hundred bytes that held 10⁹
    strings once expanded; a `spec` that is no object was spelt out in full
    for the message (minutes and gigabytes), as was any walk over the object."""
    hostile = TENANT_HEAD + "x:\n" + _laughs(8) + "\nspec: *l8\n"
    state = write_json(tmp_path / "state.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    if where == "state":
        (tmp_path / "hostile.yaml").write_text(hostile)
        write_json(tmp_path / "w.json", vm("tenant-a", "v", [{"class": "a100"}]))
        result = _invoke("--state", str(state), str(tmp_path / "hostile.yaml"), "--write", str(tmp_path / "w.json"))
    else:
        (tmp_path / "w.yaml").write_text(hostile)
        result = _invoke("--state", str(state), "--write", str(tmp_path / "w.yaml"))
    _bad_input(result, "hostile.yaml" if where == "state" else "w.yaml",
               "aliases expand the document to more than 1,000,000 nodes")


@pytest.mark.parametrize("spec", ["&s {resourceQuotas: {cpu: 1}, x: *s}", "&s [*s]"], ids=["map", "list"])
def test_an_alias_inside_the_collection_it_names_is_bad_input(tmp_path, spec):
    """A structure that contains itself: two such copies were compared until
    Python's recursion limit, and any walk over one never ends."""
    (tmp_path / "w.yaml").write_text(TENANT_HEAD + f"spec: {spec}\n")
    state = write_json(tmp_path / "state.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    _bad_input(_invoke("--state", str(state), "--write", str(tmp_path / "w.yaml")),
               "w.yaml", "an alias refers to a collection that contains it")


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    (tmp_path / "w.yaml").write_text(
        "apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata: {name: v, namespace: tenant-a}\n"
        "x: &gpu {class: a100, count: 2}\nspec:\n  gpus: [{<<: *gpu, count: 3}, *gpu]\n")
    state = write_json(tmp_path / "state.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    result = _invoke("--state", str(state), "--write", str(tmp_path / "w.yaml"))
    assert result.exit_code == 1 and "requested 5" in result.output, result.output


# -- finding 3: a sexagesimal integer costs the square of its length ----------------

@pytest.mark.parametrize("anchored", [False, True], ids=["streamed", "safe loader"])
def test_a_long_sexagesimal_integer_is_bad_input(tmp_path, anchored):
    """YAML 1.1 reads `1:59:59` as 7199; one of 60,000 groups (180 kB, in
    an annotation of a manifest) took seconds to build, 600,000 minutes.
    Refused like any number of more than 4,300 digits, in the streamed
    builder and in the safe loader that reads files with anchors."""
    hostile = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: tenant-a\n"
               f"  annotations: {{a: {'&n ' if anchored else ''}1{':59' * 60000}}}\n")
    (tmp_path / "hostile.yaml").write_text(hostile)
    state = write_json(tmp_path / "state.json", klist(as_listed([*classes(), tenant("a", quotas={A100: 4})])))
    _bad_input(_invoke("--state", str(state), str(tmp_path / "hostile.yaml")),
               "hostile.yaml", "too long (at most 4300 digits)")


# -- finding 4: a tenant namespace's vGPU label disagreeing with the Tenants -------

def _namespace(name: str, vgpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"namespace.cozystack.io/vgpu": vgpu}}}


@pytest.mark.parametrize("labelled", ["tenant-a", "tenant-a-b"])
def test_a_tenant_namespace_label_that_disagrees_with_the_tenants_refuses_vgpu(tmp_path, labelled):
    """The label is the entitlement the platform rendered for the namespace;
    the state holding it `false` while the Tenants from the root down say
    true is two sources disagreeing: admitted before (the Tenants won)."""
    from test_budgets_builders import gpuclass, root_namespace, run_check_json

    vgpu = gpuclass("a100-4c", "nvidia.com/GRID_A100_4C", mode="vgpu")
    state = [root_namespace("true"), vgpu, tenant("a", vgpu=True), tenant("b", "tenant-a", vgpu=True)]
    desktop = vm("tenant-a-b", "desktop", [{"class": "a100-4c"}])
    assert run_check_json(tmp_path, [*state, _namespace(labelled, "true")], desktop)[0] == 0
    code, answer = run_check_json(tmp_path, [*state, _namespace(labelled, "false")], desktop)
    assert code == 1, answer
    assert f"namespace {labelled}: its label says false, the Tenants from the root down say true" in (
        answer["reasons"][0]["message"])
    code, findings = run_check_json(tmp_path, [*state, _namespace(labelled, "false")])
    assert code == 1 and [(f["kind"], f["namespace"]) for f in findings] == [("vgpu-disagreement", labelled)]


# -- properties: the attacker's moves of this review ---------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_budgets_properties import SETTINGS, _answer, _other_version, _materialize, _identity, random_state, writes  # noqa: E402

from cozyrender.kube.identity import _canonical  # noqa: E402
from cozyrender.state import StateError, parse_documents  # noqa: E402
from cozyrender.yamlio import MAX_ALIAS_NODES  # noqa: E402


def _numbers(value, path=()):
    """Paths to every int (not bool) leaf of `value`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, path + (index,))
    elif type(value) is int:
        yield path


def _replaced(obj, path, value):
    import copy

    obj = copy.deepcopy(obj)
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return obj


@SETTINGS
@given(random_state, writes, st.randoms(use_true_random=False), st.data())
def test_a_copy_differing_only_in_a_number_type_is_bad_input_in_any_order(objects, write, rnd, data):
    """Finding 1 as a property: wherever a count, replica number or budget
    is written as an equal float (or bool), the two copies are bad input
    whatever their order, never an answer decided by which came first."""
    from test_budgets_properties import GPUCLASSES

    candidates = [(o, path) for o in objects for path in _numbers(o)]
    if not candidates:
        return
    original, path = data.draw(st.sampled_from(candidates))
    leaf = original
    for step in path:
        leaf = leaf[step]
    others = [float(leaf)] + ([bool(leaf)] if leaf in (0, 1) else [])
    swapped = _other_version(_replaced(original, path, data.draw(st.sampled_from(others))))
    assert _canonical(swapped) != _canonical(dict(original, apiVersion=swapped["apiVersion"]))
    obj = _materialize(write, {_identity(o): o for o in objects})
    state = objects + [swapped]
    rnd.shuffle(state)
    assert _answer(GPUCLASSES + state, obj) == ("bad input",)


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 10), st.booleans())
def test_aliases_load_only_within_the_bound(levels, branching, as_write):
    """Finding 2 as a property: a chain of anchors, each a list of
    `branching` aliases to the one before, loads when it expands the
    document by at most MAX_ALIAS_NODES nodes, and is bad input otherwise;
    never a walk over all the expanded nodes."""
    lines = ["x:", f"  k0: &l0 [{', '.join(['lol'] * branching)}]"]
    lines += [f"  k{i}: &l{i} [{', '.join([f'*l{i - 1}'] * branching)}]" for i in range(1, levels + 1)]
    text = "\n".join(lines) + f"\nkind: ConfigMap\ndata: {{v: *l{levels}}}\n"
    sizes = [1 + branching]  # each anchored list spelt out: l0 holds `branching` strings
    for _ in range(levels):
        sizes.append(1 + branching * sizes[-1])
    unique = 9 + (levels + 1) + (1 + branching) + levels  # the nodes as written
    expanded = 9 + (levels + 1) + sum(sizes) + sizes[-1]  # every alias spelt out
    try:
        loaded = parse_documents(text, "w.yaml" if as_write else "s.yaml")
    except StateError as err:
        assert "aliases expand the document to more than" in str(err)
        assert expanded - unique > MAX_ALIAS_NODES
        return
    assert expanded - unique <= MAX_ALIAS_NODES
    assert loaded[0]["data"]["v"] == loaded[0]["x"][f"k{levels}"]


# -- finding 5: one GPUClass under two spellings of its group ------------------------

@pytest.mark.parametrize("order", ["passthrough first", "vgpu first"])
def test_two_gpuclasses_of_one_name_under_two_api_version_spellings_are_bad_input(tmp_path, order):
    """The class readers take any `cozystack.io/...` apiVersion as a GPUClass,
    identity took the group before the last '/': `cozystack.io/v1alpha1/x`
    was another object, both were read as class a100, and the last one read
    decided between a passthrough class (admitted) and a vGPU class (refused)."""
    from test_budgets_builders import gpuclass

    plain = gpuclass("a100", "nvidia.com/a100")
    other = dict(gpuclass("a100", "nvidia.com/GRID_A100_4C", mode="vgpu"), apiVersion="cozystack.io/v1alpha1/x")
    pair = [plain, other] if order == "passthrough first" else [other, plain]
    result = run_check(tmp_path, [*pair, tenant("a")], vm("tenant-a", "v", [{"class": "a100"}]))
    _bad_input(result, "two different copies of one object (GPUClass cozystack.io, name a100")


# -- finding 6: negative usage --------------------------------------------------------

@pytest.mark.parametrize("where", ["pod limits", "pod requests", "quota status.used"])
def test_negative_usage_is_never_room_for_carve_outs(tmp_path, where):
    """A pod limiting `cpu: -100` (or a quota reporting it used) lowered its
    pool's usage: a child asking 50 CPUs of a parent declaring 10 was
    admitted. Kubernetes stores no negative resource quantity: the object
    cannot be read, so the audit is bad input and the child, decided in its
    pool, is refused naming it (issue 28 item 2)."""
    from test_budgets_builders import pod, quota

    hostile = {
        "pod limits": pod("tenant-a", "p", {"cpu": "-100"}),
        "pod requests": pod("tenant-a", "p", {"cpu": "1"}, requests={"cpu": "-100"}),
        "quota status.used": quota("tenant-a", "q", {"limits.cpu": "-100"}),
    }[where]
    state = [tenant("a", quotas={"cpu": 10}), hostile]
    _bad_input(run_check(tmp_path, state), "tenant-a/", "is negative (got '-100')")
    result = run_check(tmp_path, state, tenant("b", "tenant-a", quotas={"cpu": 50}))
    assert result.exit_code == 1 and "cannot be shown to fit" in result.output, result.output
    assert "(in the namespace of Tenant tenant-root/a)" in result.output
    assert "is negative (got '-100')" in result.output


# -- finding 7: a namespace name of any length ----------------------------------------

@pytest.mark.parametrize("kind", ["VMInstance", "Tenant"])
def test_a_namespace_longer_than_a_dns_label_is_in_no_pool_and_refused(tmp_path, kind):
    """A write's namespace is its author's to choose: `tenant-a-a-…` of
    40,000 characters was walked level by level, a new string per level
    (seconds; minutes at 400 kB, and the name cache held gigabytes). A
    namespace name is at most 63 characters; a Tenant whose own namespace
    would be longer is refused too (no level above it would gate it)."""
    state = [*classes(), tenant("a", quotas={A100: 1, "cpu": 1})]
    if kind == "VMInstance":
        write, field = vm("tenant" + "-a" * 20000, "v", [{"class": "a100", "count": 5}]), "metadata.namespace"
    else:
        write, field = tenant("b", "tenant-" + "a" * 56, quotas={"cpu": 5}), "metadata.name"
    code, answer = __import__("test_budgets_builders").run_check_json(tmp_path, state, write)
    assert code == 1, answer
    assert answer["reasons"][0]["field"] == field
    assert "a namespace name is at most 63 characters" in answer["reasons"][0]["message"]


# -- finding 8: a class entry giving a device-plugin name too -------------------------

def test_a_class_entry_naming_another_device_is_refused_and_reported(tmp_path):
    """The VM charts render an entry's `name` as the device the VM gets, so
    `{class: a100, name: nvidia.com/h100}` got H100s counted as A100s: eight
    under an H100 budget of 0 were admitted (and a vGPU resource under a
    passthrough class skipped the entitlement). A name equal to the class's
    resource changes nothing."""
    from test_budgets_builders import run_check_json

    h100, a100 = "h100.gpuclass.cozystack.io/devices", A100
    state = [*classes(), tenant("a", quotas={h100: 0, a100: 8})]
    disguised = vm("tenant-a", "v", [{"class": "a100", "name": "nvidia.com/h100", "count": 8}])
    code, answer = run_check_json(tmp_path, state, disguised)
    assert code == 1 and [r["field"] for r in answer["reasons"]] == ["spec.gpus[0].name"], answer
    assert "device-plugin name 'nvidia.com/h100', which is not the class's resource ('nvidia.com/a100')" in (
        answer["reasons"][0]["message"])
    plain = vm("tenant-a", "v", [{"class": "a100", "name": "nvidia.com/a100", "count": 8}])
    assert run_check_json(tmp_path, state, plain)[0] == 0
    code, findings = run_check_json(tmp_path, [*state, disguised])
    assert code == 1 and [(f["kind"], f["field"]) for f in findings] == [("device-name", "VMInstance v: spec.gpus[0].name")]
