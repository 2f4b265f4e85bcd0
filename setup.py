"""Package discovery for the wheel, the one thing pyproject.toml cannot say here.

``codecs/`` is installed as ``kcodecs`` (pyproject.toml's package-dir), and
``[tool.setuptools.packages.find]`` would find it under its directory's name, ``codecs``,
which shadows the standard library. So the list is built here: ``kcodecs`` by name, and
every package under ``mirror/`` found by discovery, subpackages included (an explicit
``packages = ["mirror"]`` installed only the top level, issue 38).
"""

from setuptools import find_packages, setup

setup(packages=["kcodecs", *find_packages(include=["mirror", "mirror.*"])])
