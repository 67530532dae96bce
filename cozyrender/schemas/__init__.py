"""Bundled JSON schemas of the custom resource kinds the charts render, taken
from each project's CRD (see README.md in this folder for sources and
licenses). `crd.py` turns a CRD's openAPIV3Schema into a JSON schema; the
files here are its output with descriptions stripped."""
