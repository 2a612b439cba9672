"""Mapping running code back to the user's kernel source (`file:line`)."""
from __future__ import annotations

import linecache
import sys

# pseudo file name of a generated kernel/task function -> the real file it came from
SOURCE_FILES: dict[str, str] = {}
# real files of helpers (@triton.jit / @tlx.jit functions called from kernels)
HELPER_FILES: set[str] = set()


def register_generated(pseudo: str, real: str) -> None:
    SOURCE_FILES[pseudo] = real


def user_location(skip_helpers: bool = False) -> tuple[str, int, str]:
    """(file, line, text) of the innermost frame of user kernel code on the calling thread's stack."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name in SOURCE_FILES or (not skip_helpers and name in HELPER_FILES):
            real = SOURCE_FILES.get(name, name)
            line = frame.f_lineno
            return real, line, linecache.getline(real, line).strip()
        frame = frame.f_back
    return "?", 0, ""


def allocation_name(file: str, line: int, fallback: str) -> str:
    """The variable an allocation was assigned to (`full_A = tlx.alloc_barriers(...)` -> 'full_A')."""
    text = linecache.getline(file, line).strip()
    head, eq, rest = text.partition("=")
    names = [n.strip() for n in head.split(",")]
    if eq and len(names) == 1 and names[0].isidentifier() and ("alloc" in rest):
        return names[0]
    return f"{fallback}@{line}"
