"""Regular files only, wherever the runtime reads a path a user or a folder names.

Opening a FIFO for reading waits for a writer that may never come, a character device can feed bytes
forever and a folder is no key or picture: each is refused in bounded time with one error naming the path,
what it is and what was expected. ``check_regular`` looks (os.stat: what the path leads to); ``read_regular``
opens with O_NONBLOCK (a FIFO then opens at once instead of waiting) and checks what it opened with fstat
before reading a byte, so a file swapped for a FIFO after a check is refused too.
Runs on the boards' Python (3.6).
"""
import os
import stat

from sensorveil.runtime.errors import InputError

OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def kind_of(mode):
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path, what, error=InputError, follow_links=True, name=None):
    """One ``error`` unless ``path`` is (or, following links, leads to) a regular file. ``name``: how the
    message names it (default: the path)."""
    name = name or path
    try:
        mode = (os.stat if follow_links else os.lstat)(str(path)).st_mode
    except OSError as reason:
        raise error("{} cannot be read ({}); expected {}".format(name, reason.strerror or reason, what))
    if not stat.S_ISREG(mode):
        raise error("{} is {}; expected {}".format(name, kind_of(mode), what))


def read_regular(path, limit, what, error=InputError, follow_links=True):
    """The bytes of the regular file ``path`` (at most ``limit``), or one ``error``: not a regular file
    (checked on what was opened), cannot be opened, or larger than ``limit``."""
    flags = OPEN_FLAGS | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    try:
        descriptor = os.open(str(path), flags)
    except OSError as reason:
        if not follow_links and os.path.islink(str(path)):
            raise error("{} is a symbolic link; expected {}".format(path, what))
        raise error("{} cannot be read ({}); expected {}".format(path, reason.strerror or reason, what))
    with os.fdopen(descriptor, "rb") as handle:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise error("{} is {}; expected {}".format(path, kind_of(mode), what))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise error("{} is larger than {} bytes; expected {}".format(path, limit, what))
    return data
