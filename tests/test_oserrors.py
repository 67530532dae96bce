"""cozyrender.oserrors: an OSError in the project's words, never Python's."""

from __future__ import annotations

import errno
import os

import pytest

from cozyrender.oserrors import describe


@pytest.mark.parametrize("code, words", [
    (errno.ENOENT, "no such file or folder"),
    (errno.EACCES, "permission denied"),
    (errno.EISDIR, "is a folder, not a file"),
    (errno.EROFS, "read-only file system"),
    (errno.ENOSPC, "no space left on the device"),
])
def test_known_errors_in_our_words(code, words):
    assert describe(OSError(code, os.strerror(code), "f.yaml")) == words


def test_other_errors_keep_the_system_text_without_errno():
    text = describe(OSError(errno.EBUSY, os.strerror(errno.EBUSY)))
    assert text == os.strerror(errno.EBUSY).lower() and "errno" not in text


def test_a_real_missing_file(tmp_path):
    with pytest.raises(OSError) as caught:
        (tmp_path / "missing.yaml").read_bytes()
    assert describe(caught.value) == "no such file or folder"
