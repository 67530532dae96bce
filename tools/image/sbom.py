"""The software bill of materials of an image's root filesystem: exactly what it installed.

Rule: the SBOM lists every Debian package dpkg records as installed in the root filesystem
(`var/lib/dpkg/status`, Status `install ok installed`: name, version, architecture) and every
Python distribution installed into its site folder by pip (the `*.dist-info` folders under
`usr/local/lib/python3.*/dist-packages`: Name and Version of each METADATA), nothing else and
nothing twice. Debian's own Python modules are Debian packages (dpkg lists them); they are not
read again from /usr/lib/python3.

The document is CycloneDX 1.6 JSON written by CycloneDX's own library (cyclonedx-python-lib:
its model, serializer and schema validation), with package URLs (`pkg:deb/debian/...`,
`pkg:pypi/...`). It is reproducible like the image: its serial number is derived from the
components and its timestamp is the build's SOURCE_DATE_EPOCH.

The image build (build.py) writes it into the image at SBOM_PATH, so the image's digest covers
it and every copy of the image carries it, and beside the OCI layout as
`<out>/<name>-image.cdx.json`.
"""

from __future__ import annotations

import datetime
import email.parser
import re
import uuid
from pathlib import Path

from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

# Where the image carries its SBOM (relative to the root filesystem).
SBOM_PATH = "usr/share/doc/cozyrender/sbom.cdx.json"
DEBIAN_DISTRO = "debian-12"
_NAMESPACE = uuid.UUID("6f1d8a52-8d0c-4c4e-9a57-3c0f3b1f0a11")  # serial numbers: uuid5 under this


class SBOMError(RuntimeError):
    pass


def debian_packages(rootfs: Path) -> list[tuple[str, str, str]]:
    """(name, version, architecture) of each package dpkg records as installed, sorted."""
    status = rootfs / "var" / "lib" / "dpkg" / "status"
    packages = []
    for stanza in status.read_text(encoding="utf-8").split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Status") == "install ok installed":
            packages.append((fields["Package"], fields["Version"], fields["Architecture"]))
    return sorted(packages)


def site_folders(rootfs: Path) -> list[Path]:
    return sorted(rootfs.glob("usr/local/lib/python3.*/dist-packages"))


def python_distributions(rootfs: Path) -> list[tuple[str, str]]:
    """(name, version) of each distribution installed in the image's pip site folder, sorted."""
    found = []
    for site in site_folders(rootfs):
        for info in sorted(site.glob("*.dist-info")):
            metadata = email.parser.Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"),
                                                     headersonly=True)
            found.append((metadata["Name"], metadata["Version"]))
    return sorted(found, key=lambda item: (_pypi_name(item[0]), item[1]))


def _pypi_name(name: str) -> str:
    """PEP 503's normalised name (what a pypi package URL carries)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def bom(rootfs: Path, name: str, version: str, epoch: int) -> Bom:
    debs = debian_packages(rootfs)
    wheels = python_distributions(rootfs)
    if not debs:
        raise SBOMError(f"{rootfs}: dpkg records no installed package")
    components = [
        Component(type=ComponentType.LIBRARY, name=package, version=ver,
                  purl=PackageURL("deb", "debian", package, ver, {"arch": arch, "distro": DEBIAN_DISTRO}),
                  bom_ref=f"deb:{package}@{ver}?arch={arch}")
        for package, ver, arch in debs
    ] + [
        Component(type=ComponentType.LIBRARY, name=dist, version=ver,
                  purl=PackageURL("pypi", None, _pypi_name(dist), ver), bom_ref=f"pypi:{_pypi_name(dist)}@{ver}")
        for dist, ver in wheels
    ]
    identity = "\n".join([name, version, *(f"deb {p} {v} {a}" for p, v, a in debs),
                          *(f"pypi {d} {v}" for d, v in wheels)])
    image = Component(type=ComponentType.CONTAINER, name=name, version=version, bom_ref=f"image:{name}")
    metadata = BomMetaData(component=image, timestamp=datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc))
    document = Bom(components=components, metadata=metadata, serial_number=uuid.uuid5(_NAMESPACE, identity))
    document.register_dependency(image, components)  # the image holds every one of them
    return document


def write(rootfs: Path, name: str, version: str, epoch: int) -> str:
    """The SBOM as CycloneDX 1.6 JSON, checked against CycloneDX's schema."""
    text = JsonV1Dot6(bom(rootfs, name, version, epoch)).output_as_string(indent=1)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise SBOMError(f"the SBOM does not validate against CycloneDX 1.6: {error}")
    return text + "\n"
