"""The package version, in a module of its own so that modules can name it without
importing the package (and its re-export table)."""

__version__ = "0.1.0"
