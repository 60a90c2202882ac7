"""Worker processes that end with the command that started them.

The bottom of the import order, beside ``_io``: this module imports nothing from ``albert_lm``.
"""

from __future__ import annotations

import os

__all__ = ["die_with_parent"]


def die_with_parent(parent_pid: int) -> None:
    """Make this worker process end when its parent (process ``parent_pid``) ends, however that ends.

    A pool's workers are children of the command that started them; killed with SIGKILL, the command cannot
    stop them, and a forked worker waiting on its task queue never sees it close (its siblings hold the
    queue's write end too): it would live on. On Linux, ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` has the kernel
    send SIGTERM when the parent dies; elsewhere a daemon thread polls the parent id every second. SIGTERM
    gets its default action (a fork inherits the parent's Python handler), SIGINT is left to the parent
    (Ctrl-C reaches the whole process group, and the parent shuts the pool down). Call it first in a pool's
    ``initializer``.
    """
    import signal
    import sys
    import threading

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) == 0:
            if os.getppid() != parent_pid:  # the parent died before the prctl took effect
                os._exit(1)
            return

    def watch() -> None:
        import time

        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
