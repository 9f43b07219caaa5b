"""Whether a shared library file is whole, read from its ELF headers before it is loaded.

dlopen maps a library's segments at the offsets its program headers give; a file cut short (a full
disk, a killed copy) has segments past its end, and touching them kills the process with SIGBUS
inside dlopen, with no message. Checked here instead: the ELF identity, then every loadable segment
and the section header table lie inside the file.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

__all__ = ["damage"]

_PT_LOAD = 1


def damage(path: Path) -> str | None:
    """None when `path` is a whole ELF shared library (64- or 32-bit, either byte order), else what is
    wrong with it, in words."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 16 or head[:4] != b"\x7fELF":
                return f"not an ELF library ({size} bytes)"
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            if wide:
                if len(head) < 64:
                    return f"its ELF header is cut short ({size} bytes)"
                phoff, shoff = struct.unpack_from(order + "QQ", head, 0x20)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x36)
            else:
                if len(head) < 52:
                    return f"its ELF header is cut short ({size} bytes)"
                phoff, shoff = struct.unpack_from(order + "II", head, 0x1C)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 0x2A)
            if phoff + phnum * phentsize > size:
                return f"truncated: its program headers end past the file's {size} bytes"
            f.seek(phoff)
            table = f.read(phnum * phentsize)
            for i in range(phnum):
                entry = table[i * phentsize:(i + 1) * phentsize]
                if wide:
                    kind, _, offset, _, _, filesz = struct.unpack_from(order + "IIQQQQ", entry)
                else:
                    kind, offset, _, _, filesz = struct.unpack_from(order + "IIIII", entry)
                if kind == _PT_LOAD and offset + filesz > size:
                    return f"truncated: {size} bytes, its segments need {offset + filesz}"
            if shnum and shoff + shnum * shentsize > size:
                return f"truncated: {size} bytes, its section headers end at {shoff + shnum * shentsize}"
    except OSError as e:
        return f"unreadable ({e.strerror})"
    return None
