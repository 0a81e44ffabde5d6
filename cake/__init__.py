"""CAKE: evolve GPU kernels through a typed schedule IR; believe a kernel only when contract gates say so."""

__version__ = "0.1.0"
