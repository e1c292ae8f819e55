"""Measurement on this machine: timing, memory trackers, inference/training sweeps, isolation.

Importing this package does not import torch; the sweep imports it in child processes.
"""
