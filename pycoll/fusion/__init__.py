"""Fusion: many arrays, few collectives (pycoll.FusionManager).

buckets.py   assign_buckets, the pure function that groups arrays
manager.py   FusionManager, which owns the pack buffers and runs the buckets
"""
from pycoll.fusion.buckets import assign_buckets

__all__ = ["assign_buckets"]
