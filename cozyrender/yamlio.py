"""The YAML reader and writer every module shares: libyaml's safe loader
where PyYAML was built with it (the same results, much faster), and a dumper
for the YAML cozyrender writes for people to read (block style, multi-line
strings as literal blocks, no line folding, keys in the order given)."""

from __future__ import annotations

import yaml

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"


class ReadableDumper(yaml.SafeDumper):
    """Block style; a string with line breaks as a literal block."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


ReadableDumper.add_representer(str, _str)


def dump_readable(value: object, **options: object) -> str:
    """`value` as readable YAML (see ReadableDumper); `options` go to yaml.dump."""
    settings = {"sort_keys": False, "default_flow_style": False, "allow_unicode": True, "width": 1 << 16}
    return yaml.dump(value, Dumper=ReadableDumper, **{**settings, **options})
