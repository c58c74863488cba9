"""Calls into student code: see :mod:`.client`."""
