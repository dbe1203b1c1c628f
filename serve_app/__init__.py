"""The edge: HTTP routes, the Serve ingress and graph, bucket events, the CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("portrait-serve")
except PackageNotFoundError:
    __version__ = "0+unknown"
