# The bootstrap of every bounded query's interpreter (see bootstrap.go).
#
# Run as: python3 -I -S -B -c <this file> FD PATH
#
# It imports the standard modules a script usually imports, then blocks on
# descriptor FD until the runtime hands it the script: a line holding the
# script's length in ASCII decimal, then that many bytes. It closes FD and
# runs the script as `python3 -I -S -B PATH` would: in a fresh __main__
# namespace with __file__ = PATH, sys.argv == [PATH], tracebacks that name
# PATH and show none of this file's frames, uncaught exceptions through
# sys.excepthook and exit status 1, SystemExit as the interpreter handles it.
# The runtime places the same bytes read-only at PATH before handing them
# over, so that tracebacks, linecache and open(__file__) see them. One
# difference from the interpreter's own file reader: a script holding a NUL
# byte is always refused (compile's ValueError, exit status 1).
#
# Everything lives in one function so that nothing of it stays in __main__.


def _awf_bootstrap():
    import sys
    import os

    # Preloaded for the script (measured: see bootstrap.go). They are only
    # in sys.modules; none is bound in the script's namespace.
    import json  # noqa: F401
    import re  # noqa: F401
    import hashlib  # noqa: F401
    import subprocess  # noqa: F401

    fd, path = int(sys.argv[1]), sys.argv[2]
    buf = bytearray()
    while b"\n" not in buf:
        chunk = os.read(fd, 64)
        if not chunk or len(buf) > 32:
            os.write(2, b"awf bootstrap: no script header\n")
            os._exit(125)
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\n")
    size = int(head)
    parts = [rest]
    have = len(rest)
    while have < size:
        chunk = os.read(fd, min(size - have, 1 << 16))
        if not chunk:
            os.write(2, b"awf bootstrap: short script\n")
            os._exit(125)
        parts.append(chunk)
        have += len(chunk)
    os.close(fd)
    if fd == 0:
        # What the script's stdin would have been: nothing.
        null = os.open("/dev/null", os.O_RDONLY)
        if null != 0:
            os.dup2(null, 0)
            os.close(null)
    source = b"".join(parts)
    if len(source) != size:
        os.write(2, b"awf bootstrap: script longer than its header\n")
        os._exit(125)

    main = sys.modules["__main__"]
    g = main.__dict__
    builtins = g["__builtins__"]
    # The loader class a script's __main__ gets, from the module the
    # interpreter has already imported (importlib.machinery would add more).
    loader = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    g.clear()
    g.update(
        __name__="__main__",
        __doc__=None,
        __package__=None,
        __loader__=loader,
        __spec__=None,
        __annotations__={},
        __builtins__=builtins,
        __file__=path,
        __cached__=None,
    )
    sys.argv = [path]
    sys.orig_argv = sys.orig_argv[:-4] + [path]
    del buf, head, rest, parts, chunk, main, loader, builtins
    try:
        exec(compile(source, path, "exec", dont_inherit=True), g)
    except SystemExit:
        raise
    except BaseException as e:
        # Drop this function's own frame, as if the script had been the
        # interpreter's main module.
        # (the printed traceback is the exception's own).
        tb = e.__traceback__.tb_next
        e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        sys.exit(1)


_awf_bootstrap()
