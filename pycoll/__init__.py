"""pycoll: collective communication algorithms for Python."""

__version__ = "0.1.0"
