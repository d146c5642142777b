"""Shim so that `pip install -e .` works with older pip; all metadata lives in setup.cfg."""
from setuptools import setup

setup()
