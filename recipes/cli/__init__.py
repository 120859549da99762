"""``specvideo train KIND``: the recipes that produced the shipped weights. The ``specvideo`` CLI
registers them when this folder is beside the installed package (a checkout of the repository)."""

from recipes.cli.train import add

__all__ = ["add"]
