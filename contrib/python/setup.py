# pip install ./contrib/python  (stdlib only; no build dependency beyond setuptools)
from setuptools import setup

setup(
    name="lcrun-client",
    version="0.1.0",
    description="Client of lcd's sandbox API (lcrun): sandboxes, exec, files, sessions, snapshots, forks",
    packages=["lcrun_client"],
    python_requires=">=3.7",
)
