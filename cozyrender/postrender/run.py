"""`cozyrender post-render` as a process: stdin to stdout, or one error line.

On failure nothing reaches stdout, so Helm aborts instead of applying half a
release. Helm 4 discards a post-renderer plugin's stderr, so the message also
goes to the controlling terminal when there is one and to the file named by
COZYRENDER_LOG when that is set.
"""

from __future__ import annotations

import os
import sys

PROG = "cozyrender post-render"


def main() -> int:
    from cozyrender.postrender.errors import PostRenderError
    from cozyrender.postrender.pipeline import output_pieces, plan_output

    data = sys.stdin.buffer.read()
    try:
        chunks, plan, warnings = plan_output(data)
    except PostRenderError as err:
        report(f"{PROG}: error: {err.message}")
        return 1
    except RecursionError:
        report(f"{PROG}: error: the input is nested too deeply")
        return 1
    except Exception as err:  # a bug: still nothing on stdout, still one line
        report(f"{PROG}: internal error: {type(err).__name__}: {err}")
        return 70
    for warning in warnings:
        sys.stderr.write(f"{PROG}: warning: {warning}\n")
    sys.stdout.buffer.writelines(output_pieces(data, chunks, plan))
    sys.stdout.buffer.flush()
    return 0


def report(message: str) -> None:
    """The message on stderr, on the terminal when stderr is not it, and in COZYRENDER_LOG."""
    line = message + "\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    if not _stderr_is_tty():
        try:
            with open("/dev/tty", "w") as tty:
                tty.write(line)
        except OSError:
            pass  # no controlling terminal (CI, Flux, a pipe)
    log_path = os.environ.get("COZYRENDER_LOG")
    if log_path:
        try:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(line)
        except OSError as err:
            sys.stderr.write(f"{PROG}: cannot write COZYRENDER_LOG {log_path}: {err.strerror}\n")


def _stderr_is_tty() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
