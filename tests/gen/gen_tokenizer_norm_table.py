#!/usr/bin/env python3
"""Prints the `inert` table of src/text/tok_normalize.c.

The `tokenizers` package normalizes with Unicode tables older than
utf8proc's, so a few hundred newer code points (combining marks, compatibility
characters) are left untouched by it. This compares both implementations on
every code point (alone and around a combining mark) and prints the ranges
where they differ, as C initialisers."""
import ctypes

from tokenizers import normalizers as N

u = ctypes.CDLL("libutf8proc.so.2")
libc = ctypes.CDLL("libc.so.6")
libc.free.argtypes = [ctypes.c_void_p]
for f in ("utf8proc_NFC", "utf8proc_NFKD"):
    getattr(u, f).restype = ctypes.c_void_p


def utf8proc(form, s):
    p = getattr(u, "utf8proc_" + form)(s.encode())
    r = ctypes.string_at(p).decode()
    libc.free(p)
    return r


def main():
    ref = {"NFC": N.NFC(), "NFKD": N.NFKD()}
    bad = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        s = "\u0345".join([c, "\u0345" + c, c + "\u0345", "a" + c]) + "\u0345" + c
        if any(ref[f].normalize_str(s) != utf8proc(f, s) for f in ("NFC", "NFKD")):
            bad.append(cp)
    ranges = []
    for cp in bad:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    print(", ".join(f"{{0x{a:X}, 0x{b:X}}}" for a, b in ranges))


if __name__ == "__main__":
    main()
