"""The GPUClass CRD on the real API server, the oracle for `cozyrender gpuclass
validate`: every create and update of the corpus (tests/gpuclass_corpus.py)
is accepted or refused by kube-apiserver v1.35.4 exactly as the offline
validator answers, and a refusal names the same fields. A disagreement is a
bug in ours."""

from __future__ import annotations

import copy

import pytest

from cozyrender.gpuclass.validation import validate_gpuclass

from gpuclass_corpus import cases, name_for
from kubeapi import GPUCLASSES, KubeAPI

CORPUS = cases()


def test_the_corpus_is_large_and_mixed():
    creates = [case for case in CORPUS if case[1] is None]
    updates = [case for case in CORPUS if case[1] is not None]
    assert len(CORPUS) >= 300 and len(updates) >= 40
    verdicts = [validate_gpuclass(new, old).ok for _, old, new in CORPUS]
    assert 0.15 < sum(verdicts) / len(verdicts) < 0.85  # both answers well represented
    assert len({case_id for case_id, _, _ in CORPUS}) == len(CORPUS)
    assert creates


def _server_fields(status: dict) -> set[str]:
    causes = (status.get("details") or {}).get("causes") or []
    return {cause.get("field", "") for cause in causes if cause.get("field")}


def _our_fields(result) -> set[str]:
    return {violation.path for violation in result.violations}


def _field_root(path: str) -> str:
    """The field a cause is about, as both sides name it: the server adds a
    list index or `<nil>` for a rule on the root, and names some schema
    errors at the parent (`spec.license.featureType` vs `spec.license`)."""
    return path.split("[")[0].replace("<nil>", "")


def _same_field(one: str, other: str) -> bool:
    """Whether two field roots name the same field: equal, or one the parent of
    the other (the server names some schema errors at the parent)."""
    return one == other or one.startswith(other + ".") or other.startswith(one + ".") or "" in (one, other)


def test_the_field_comparison_is_not_an_overlap():
    assert _same_field("spec.license", "spec.license.featureType") and _same_field("spec.mode", "spec.mode")
    assert not _same_field("spec.mode", "spec.model") and not _same_field("spec.memory", "spec.mode")


@pytest.fixture(scope="module")
def api(apiserver):
    return KubeAPI(apiserver)


def test_every_corpus_case_gets_the_servers_answer(api):
    disagreements = []
    for index, (case_id, old, new) in enumerate(CORPUS):
        new = name_for(case_id, new, index)
        ours = validate_gpuclass(new, None if old is None else name_for(case_id, old, index))
        if old is None:
            status, answer = api.create(GPUCLASSES, new)
        else:
            old = name_for(case_id, old, index)
            created_status, created = api.create(GPUCLASSES, old)
            assert created_status == 201, (case_id, created)
            body = copy.deepcopy(new)
            body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
            status, answer = api.replace(f"{GPUCLASSES}/{new['metadata']['name']}", body)
        accepted = status in (200, 201)
        if accepted != ours.ok:
            disagreements.append(f"{case_id}: server {status} {answer.get('message', '')[:300]!r}; "
                                 f"ours ok={ours.ok} {[str(v) for v in ours.violations][:3]}")
        elif not accepted and status == 422:
            server = {_field_root(f) for f in _server_fields(answer)}
            mine = {_field_root(f) for f in _our_fields(ours)}
            # Every field the server names is one we name, and every one we name the
            # server names (a shared field alone would pass a refusal that misses others).
            missed = sorted(f for f in server if not any(_same_field(f, m) for m in mine))
            extra = sorted(m for m in mine if not any(_same_field(m, f) for f in server))
            if not server or missed or extra:
                disagreements.append(f"{case_id}: refused on different fields: server {sorted(server)}, ours "
                                     f"{sorted(mine)} (missed {missed}, extra {extra})")
        if accepted:
            api.delete(f"{GPUCLASSES}/{new['metadata']['name']}")
    assert not disagreements, f"{len(disagreements)} of {len(CORPUS)} disagree:\n" + "\n".join(disagreements)
