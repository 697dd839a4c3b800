"""File names made from names the user wrote (elements, projects, published files): one rule for
the runtime's run directory and for the workspace that reads it. Imports nothing of Spark."""
from __future__ import annotations


def file_name(name: str) -> str:
    """``name`` with every character but letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``
    (module elements are ``inst.elem``; CCL names may hold any letter)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
