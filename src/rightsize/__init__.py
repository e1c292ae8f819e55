"""rightsize: pick the cheapest hardware that meets a deep-learning workload's deadline or SLO."""

__version__ = "0.1.0"
__all__ = ["__version__"]
