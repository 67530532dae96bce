"""`cozyrender post-render` as a process: stdin to stdout, or one error line.

On failure nothing reaches stdout, so Helm aborts instead of applying half a
release. Errors and warnings are written where someone will see them
(`report`): stderr (Helm 3 shows it), the controlling terminal when there is
one and stderr is not it (Helm 4 discards a post-renderer plugin's stderr), the
file named by COZYRENDER_LOG when that is set (CI, Flux), and Helm's own
stderr where Helm would hide ours: always under Helm 4 (so a CI log shows the
reason next to Helm's `plugin "cozyrender" exited with error`), and for
warnings under Helm 3 (which shows a post-renderer's stderr only when it fails).

Usage mistakes on this path are Helm configuration mistakes, reported the same
way with the fix (`usage_error`): Helm 4 runs the plugin as
`cozyrender post-render` and appends `--post-renderer-args`; Helm 3 runs the
executable with exactly `--post-renderer-args`.
"""

from __future__ import annotations

import os
import stat
import sys

from cozyrender.oserrors import describe

PROG = "cozyrender post-render"
EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 70
# Helm 4 sets these for every plugin it runs (HELM_PLUGIN_NAME, HELM_PLUGIN_DIR); Helm 3
# runs a post-renderer executable with its own environment, without them.
HELM4_PLUGIN_ENV = "HELM_PLUGIN_NAME"


def main() -> int:
    from cozyrender.postrender.errors import PostRenderError
    from cozyrender.postrender.pipeline import output_pieces, plan_output

    data = sys.stdin.buffer.read()
    try:
        chunks, plan, warnings = plan_output(data)
    except PostRenderError as err:
        report(f"{PROG}: error: {err.message}")
        return EXIT_ERROR
    except RecursionError:
        report(f"{PROG}: error: the input is nested too deeply")
        return EXIT_ERROR
    except Exception as err:  # a bug: still nothing on stdout, still one line
        report(f"{PROG}: internal error: {type(err).__name__}: {err}")
        return EXIT_INTERNAL
    for warning in warnings:
        report(f"{PROG}: warning: {warning}", warning=True)
    sys.stdout.buffer.writelines(output_pieces(data, chunks, plan))
    sys.stdout.buffer.flush()
    return 0


def under_helm4() -> bool:
    """Run by Helm 4 as a plugin (Helm 4 names the plugin in the environment)."""
    return bool(os.environ.get(HELM4_PLUGIN_ENV))


def usage_error(extra: list[str]) -> int:
    """`cozyrender post-render EXTRA...` or `cozyrender` alone on a pipe: one
    line naming the Helm flag to fix; exit 2, nothing on stdout."""
    if not extra:
        message = ("cozyrender: error: no command given; as a Helm 3 post-renderer add "
                   "`--post-renderer-args post-render` (helm ... --post-renderer cozyrender "
                   "--post-renderer-args post-render); run `cozyrender --help` for the commands")
    elif under_helm4():
        message = (f"{PROG}: error: unexpected argument {' '.join(extra)!r}: Helm 4 runs the plugin as "
                   "`cozyrender post-render` already; drop --post-renderer-args from the helm command")
    else:
        message = (f"{PROG}: error: unexpected argument {' '.join(extra)!r}: post-render takes no "
                   "arguments; as a Helm 3 post-renderer give exactly `--post-renderer-args post-render`")
    report(message)
    return EXIT_USAGE


def _parent_is_helm() -> bool:
    """Run by a `helm` binary (Helm 3 runs the post-renderer as its direct child)."""
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as comm:
            return comm.read().strip().startswith("helm")
    except OSError:
        return False


def report(message: str, warning: bool = False) -> None:
    """The message on stderr, on the terminal when stderr is not it, in
    COZYRENDER_LOG, and on Helm's own stderr (when that is not the terminal)
    wherever Helm would not show ours: Helm 4 always, Helm 3 for warnings."""
    line = (message.replace("\r", "\\r").replace("\n", "\\n")) + "\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    wrote_tty = False
    if not _is_tty(sys.stderr):
        try:
            with open("/dev/tty", "w") as tty:
                tty.write(line)
            wrote_tty = True
        except OSError:
            pass  # no controlling terminal (CI, Flux, a pipe)
    if not wrote_tty and (under_helm4() or (warning and _parent_is_helm())):
        _to_parent_stderr(line)
    log_path = os.environ.get("COZYRENDER_LOG")
    if log_path:
        try:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(line)
        except OSError as err:
            sys.stderr.write(f"{PROG}: cannot write COZYRENDER_LOG {log_path}: "
                             f"{describe(err)}\n")


def _to_parent_stderr(line: str) -> None:
    """Append `line` to the stderr of the process that ran us (Helm), where
    Linux exposes it (/proc/PPID/fd/2): a pipe (what CI collects) or a file
    Helm appends to. A terminal is skipped (the /dev/tty write covers it), and
    so is a file Helm writes at its own offset (`2> file`): Helm's next write
    would land over ours. Anything else (not Linux, a socket) is silent."""
    ppid = os.getppid()
    try:
        fd = os.open(f"/proc/{ppid}/fd/2", os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if os.isatty(fd):
            return
        if stat.S_ISREG(os.fstat(fd).st_mode) and not _appends(ppid):
            return
        os.write(fd, line.encode("utf-8", "replace"))
    except OSError:
        pass
    finally:
        os.close(fd)


def _appends(pid: int) -> bool:
    """The process's stderr was opened for appending (`2>> file`)."""
    try:
        with open(f"/proc/{pid}/fdinfo/2", encoding="ascii") as info:
            for entry in info:
                if entry.startswith("flags:"):
                    return bool(int(entry.split()[1], 8) & os.O_APPEND)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _is_tty(stream) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
