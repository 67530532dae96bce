"""A private OCI registry on loopback for the test node: Debian's docker-registry (distribution 2.8).

Rule: what the node runs and what Helm installs come from the registry, as a hoster's cluster
gets them, never imported by hand. `Registry(plane).start()`:
- serves on 127.0.0.1:<free port> with TLS (a serving certificate from the plane's CA, made for
  the run: pki.py) and HTTP basic authentication (an htpasswd file of one user with a password
  made for the run, bcrypt as distribution requires: Debian's `htpasswd -B`), storage under
  `<plane>/registry/data`; ready once its API answers `/v2/` (401 without the credentials, 200
  with them);
- `push_image` copies an OCI layout of `make image` (dist/<name>-image) into it with skopeo
  (`--preserve-digests`: the registry's digest is the layout's, which the chart's `imageDigest`
  pins), then reads the digest back from the registry's manifest (`Docker-Content-Digest`);
- `push_chart` packages a chart and pushes it as an OCI artifact with Helm 4 (`helm registry
  login`, `helm push ... oci://`), both with the registry's CA (`--ca-file`);
- `hosts_dir` is containerd's registry host configuration (its CRI `config_path`): one
  `hosts.toml` naming the registry and the CA it is checked against. containerd gets no
  credentials: the kubelet passes those of a pod's `imagePullSecrets` with each pull
  (`pull_secret` makes such a Secret).

The process is one of the plane's (`plane._spawn`), so `plane.stop()` and `cluster.py down` stop
it; its files are under the plane's folder and go with it.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from common import free_port

REGISTRY = Path("/usr/bin/docker-registry")
HTPASSWD = Path("/usr/bin/htpasswd")
SKOPEO = Path("/usr/bin/skopeo")
USER = "cozyrender-push"
IMAGE_REPOSITORY = "cozyrender"  # <host>/cozyrender:<tag>
CHART_REPOSITORY = "charts"  # oci://<host>/charts/<chart>


class RegistryError(RuntimeError):
    pass


def _run(argv: list[str], timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    if result.returncode != 0:
        raise RegistryError(f"{' '.join(argv[:3])}: {(result.stderr or result.stdout).strip()[:2000]}")
    return result


class Registry:
    def __init__(self, plane) -> None:
        self.plane = plane
        self.dir = plane.dir / "registry"
        self.port = 0
        self.password = ""
        self.ca = plane.pki / "ca.crt"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def hosts_dir(self) -> Path:
        """containerd's CRI `config_path`: <host>/hosts.toml."""
        return self.dir / "hosts"

    def start(self) -> Registry:

        for tool in (REGISTRY, HTPASSWD, SKOPEO):
            if not tool.exists():
                raise RegistryError(f"{tool} is missing: run `make node-packages`")
        plane = self.plane
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cert, key = plane.ca.issue("registry", "registry", server_names=("127.0.0.1",))
        self.password = secrets.token_urlsafe(24)
        htpasswd = self.dir / "htpasswd"
        htpasswd.write_text(_run([str(HTPASSWD), "-B", "-b", "-n", USER, self.password]).stdout)
        htpasswd.chmod(0o600)
        config = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.dir / "data")}, "delete": {"enabled": True}},
            "http": {"addr": self.host, "tls": {"certificate": str(cert), "key": str(key)},
                     # The debug server would listen on a fixed port (5001): none.
                     "headers": {"X-Content-Type-Options": ["nosniff"]}},
            "auth": {"htpasswd": {"realm": "cozyrender-test-registry", "path": str(htpasswd)}},
        }
        config_file = self.dir / "config.yml"
        config_file.write_text(yaml.safe_dump(config))
        # skopeo's certificate folder: the CA as a *.crt file.
        certs = self.dir / "certs.d"
        certs.mkdir(exist_ok=True)
        shutil.copyfile(self.ca, certs / "ca.crt")
        plane._spawn("registry", [str(REGISTRY), "serve", str(config_file)])
        plane.ports["registry"] = self.port
        plane._save()
        plane._wait("the registry's /v2/ with its credentials", lambda: self._status("/v2/") == 200, 30)
        if self._status("/v2/", credentials=False) != 401:
            raise RegistryError("the registry answers /v2/ without credentials")
        self._hosts_toml()
        return self

    def _request(self, path: str, method: str = "GET", credentials: bool = True):
        request = urllib.request.Request(f"https://{self.host}{path}", method=method)
        if credentials:
            token = base64.b64encode(f"{USER}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        request.add_header("Accept", "application/vnd.oci.image.manifest.v1+json, "
                                     "application/vnd.oci.image.index.v1+json")
        return urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(self.ca)), timeout=10)

    def _status(self, path: str, credentials: bool = True) -> int:
        try:
            with self._request(path, credentials=credentials) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code

    def _hosts_toml(self) -> None:
        folder = self.hosts_dir / self.host
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts.toml").write_text(
            f'server = "https://{self.host}"\n\n'
            f'[host."https://{self.host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{self.ca}"\n')

    def manifest_digest(self, repository: str, tag: str) -> str:
        with self._request(f"/v2/{repository}/manifests/{tag}", method="HEAD") as response:
            return response.headers["Docker-Content-Digest"]

    def push_image(self, layout: Path, repository: str = IMAGE_REPOSITORY) -> tuple[str, str]:
        """The layout's one image pushed under its tag; (reference `<host>/<repository>:<tag>`, digest)."""
        index = json.loads((layout / "index.json").read_text())
        manifest = index["manifests"][0]
        tag = manifest["annotations"]["org.opencontainers.image.ref.name"]
        reference = f"{self.host}/{repository}:{tag}"
        _run([str(SKOPEO), "--insecure-policy", "copy", "--quiet", "--preserve-digests",
              "--dest-cert-dir", str(self.dir / "certs.d"), "--dest-creds", f"{USER}:{self.password}",
              f"oci:{layout}:{tag}", f"docker://{reference}"])
        digest = self.manifest_digest(repository, tag)
        if digest != manifest["digest"]:
            raise RegistryError(f"{reference}: the registry holds {digest}, the layout {manifest['digest']}")
        return reference, digest

    def helm(self, helm_env: dict, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return _run([str(self.plane.bin / "helm4"), *args], env=helm_env, input=input)

    def login(self, helm_env: dict) -> None:
        self.helm(helm_env, "registry", "login", self.host, "--username", USER, "--password-stdin",
                  "--ca-file", str(self.ca), input=self.password)

    def push_chart(self, chart: Path, helm_env: dict) -> tuple[str, str]:
        """`chart` packaged and pushed; (`oci://<host>/charts/<name>`, version)."""
        meta = yaml.safe_load((chart / "Chart.yaml").read_text())
        packages = self.dir / "charts"
        packages.mkdir(exist_ok=True)
        self.helm(helm_env, "package", str(chart), "-d", str(packages))
        self.login(helm_env)
        self.helm(helm_env, "push", str(packages / f"{meta['name']}-{meta['version']}.tgz"),
                  f"oci://{self.host}/{CHART_REPOSITORY}", "--ca-file", str(self.ca))
        return f"oci://{self.host}/{CHART_REPOSITORY}/{meta['name']}", str(meta["version"])

    def pull_secret(self, namespace: str, name: str) -> None:
        """A `kubernetes.io/dockerconfigjson` Secret with the registry's credentials."""
        self.plane.kubectl("-n", namespace, "create", "secret", "docker-registry", name,
                           f"--docker-server={self.host}", f"--docker-username={USER}",
                           f"--docker-password={self.password}")
