"""Release and namespace names: the rules Kubernetes and Helm apply, checked
before rendering so that a bad name never reaches the objects derived from it."""

from __future__ import annotations

from cozyrender.kube.names import DNS1123_LABEL, DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN
from cozyrender.render.errors import RenderError


# Helm's release name rule (pkg/chart/common/util ValidateReleaseName): DNS-1123
# subdomain characters, at most 53 so that names derived from it still fit.
RELEASE_NAME_MAX = 53


def name_problem(name: str, what: str) -> str | None:
    """Why `name` is not a valid namespace (`what="namespace"`, a DNS-1123
    label) or release name (`what="release"`, Helm's rule), or None. Kubernetes
    refuses such a namespace at apply time; catching it at render time keeps a
    name like `tenant-Root` from reaching the objects derived from it."""
    if what == "namespace":
        rule, limit, pattern = "a DNS-1123 label", DNS1123_LABEL_MAX, DNS1123_LABEL
    else:
        rule, limit, pattern = "a DNS-1123 subdomain as Helm requires", RELEASE_NAME_MAX, DNS1123_SUBDOMAIN
    shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
    if not name:
        return f"the {what} name is empty; it must be {rule}"
    if len(name) > limit:
        return f"{what} name {shown} is {len(name)} characters; at most {limit} are allowed"
    if not pattern.fullmatch(name):
        return (f"{what} name {shown} is not {rule}: lower-case letters, digits and '-'"
                f"{', and dots between such parts' if what == 'release' else ''}, starting and "
                "ending with a letter or digit")
    return None


def check_names(release: str, namespace: str) -> None:
    """RenderError when the release or namespace name breaks Kubernetes' rules."""
    for name, what in ((namespace, "namespace"), (release, "release")):
        problem = name_problem(name, what)
        if problem:
            raise RenderError(problem)
