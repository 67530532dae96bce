"""Set cozyrender's one version everywhere it is stated (issue 29 item 5).

    python tools/set_version.py 0.3.0 [--root DIR]

The source is cozyrender/__init__.py's `__version__` (pyproject.toml reads it);
the webhook chart's `version` and `appVersion`, the image tag in its values and
the Helm plugin's version are rewritten to match, each line edited in place.
tests/test_version.py checks that they agree.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EDITS = (  # file, line pattern (group 1 kept, the version after it replaced)
    ("cozyrender/__init__.py", r'^(__version__ = ")[^"]+(")$'),
    ("charts/cozyrender-webhook/Chart.yaml", r'^(version: )\S+()$'),
    ("charts/cozyrender-webhook/Chart.yaml", r'^(appVersion: ")[^"]+(")$'),
    ("charts/cozyrender-webhook/values.yaml", r'^(image: "[^"]*:)[^":]+(")$'),
    ("plugins/cozyrender/plugin.yaml", r'^(version: )\S+()$'),
    ("plugins/cozyrender/plugin.yaml", r'^(# archive .*cozyrender-)\d+\.\d+\.\d+(\.tgz.*)$'),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args(argv)
    if not re.fullmatch(r"\d+\.\d+\.\d+", args.version):
        print(f"set_version: error: {args.version!r} is not MAJOR.MINOR.PATCH", file=sys.stderr)
        return 2
    root = Path(args.root)
    for rel, pattern in EDITS:
        path = root / rel
        text = path.read_text()
        new, count = re.subn(pattern, lambda m: f"{m[1]}{args.version}{m[2]}", text, flags=re.M)
        if count != 1 and "archive" not in pattern:
            print(f"set_version: error: {rel}: expected one line matching {pattern}, found {count}", file=sys.stderr)
            return 1
        path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
