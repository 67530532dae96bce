"""An operating system's refusal in the project's words.

The rule: every message that names a file the system would not read or write
says why in plain words (`no such file or folder`, `permission denied`,
`read-only file system`), never Python's `[Errno N]` or its exception name.
Errors without words of our own fall back to the system's own text, in lower
case. Every module that reports an OSError to a user words it here, once.
"""

from __future__ import annotations

import errno as _errno

_WORDS = {
    _errno.ENOENT: "no such file or folder",
    _errno.EACCES: "permission denied",
    _errno.EPERM: "permission denied",
    _errno.EISDIR: "is a folder, not a file",
    _errno.ENOTDIR: "a part of the path is not a folder",
    _errno.EROFS: "read-only file system",
    _errno.ENOSPC: "no space left on the device",
    _errno.ENAMETOOLONG: "the name is too long",
    _errno.ELOOP: "too many levels of symbolic links",
}


def describe(err: OSError) -> str:
    """`err` in words, without Python's `[Errno N]`."""
    return _WORDS.get(err.errno or 0) or (err.strerror or str(err) or type(err).__name__).lower()
