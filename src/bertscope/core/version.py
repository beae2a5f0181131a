"""bertscope's version, where every floor may read it (the package re-exports it as `__version__`)."""

__version__ = "0.1.0"  # pyproject.toml's version
