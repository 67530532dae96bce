"""Kubernetes' name rules (apimachinery's IsDNS1123Label and
IsDNS1123Subdomain), in one place for every module that checks a name.

A DNS-1123 label (namespaces, GPU class names, the class part of a budget key):
at most 63 lower-case letters, digits and '-', starting and ending with a
letter or digit. A DNS-1123 subdomain (the names of most objects, custom
resources included, and Helm's release names): such labels joined by '.', at
most 253 characters. Pure functions, no I/O.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
# apimachinery's wording of a subdomain failure (validation.IsDNS1123Subdomain).
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                     "'-' or '.', and must start and end with an alphanumeric character")


def is_dns1123_label(name: str) -> bool:
    return len(name) <= DNS1123_LABEL_MAX and DNS1123_LABEL.fullmatch(name) is not None


def is_dns1123_subdomain(name: str) -> bool:
    return len(name) <= DNS1123_SUBDOMAIN_MAX and DNS1123_SUBDOMAIN.fullmatch(name) is not None
