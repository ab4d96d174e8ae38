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
# Ending: the interpreter's own finalisation (tearing down every module)
# costs milliseconds that a script almost never observes. So after the
# script the bootstrap does what the interpreter does after a file (it
# flushes the standard streams, reports an uncaught exception as
# PyErr_Print does, then removes __file__ and __cached__ from __main__) and
# lets the interpreter end as usual: join the non-daemon threads, run the
# atexit callbacks. The first callback registered, so the last to run, is
# the bootstrap's: if nothing is left whose teardown could be observed, it
# flushes sys.stdout and sys.stderr as the interpreter would next and ends
# with os._exit and the interpreter's exit status (SIGINT after an uncaught
# KeyboardInterrupt); otherwise it returns, and the interpreter finalises.
# "Nothing left" means: no other thread; no audit hook, trace or profile
# function, gc callback, gc debug flag or gc.garbage of the script's; the
# warnings filters as they were (ResourceWarning ignored); the standard
# streams and their descriptors as they were, blocking; no socket or
# sqlite3 module; no metaclass that hashes or compares classes; and no
# live object, garbage included, with a finaliser: none with __del__, no
# file open (closed files and in-memory ones pass), no suspended generator
# or coroutine, no weak reference with a callback other than the standard
# library's weak sets' and abc's. The check reads all this without running
# any of the script's code. A script sees one difference: atexit's private
# _ncallbacks() counts the bootstrap's callback.
#
# Everything lives in one function so that nothing of it stays in __main__.


def _awf_bootstrap():
    import sys
    import os

    # What the bootstrap calls after the script, bound here: its functions'
    # globals are the script's, and a script may replace a builtin or a
    # module's function.
    import builtins
    (any, len, type, id, set, map, zip, issubclass, tuple, int, str, object, dict,
     BaseException, SystemExit, KeyboardInterrupt, RuntimeError, ValueError, OSError) = (
        builtins.any, builtins.len, builtins.type, builtins.id, builtins.set, builtins.map,
        builtins.zip, builtins.issubclass, builtins.tuple, builtins.int, builtins.str,
        builtins.object, builtins.dict, builtins.BaseException, builtins.SystemExit,
        builtins.KeyboardInterrupt, builtins.RuntimeError, builtins.ValueError, builtins.OSError)
    write, _exit, kill, getpid, fstat, get_blocking = os.write, os._exit, os.kill, os.getpid, os.fstat, os.get_blocking
    audit, gettrace, getprofile, current_frames = sys.audit, sys.gettrace, sys.getprofile, sys._current_frames
    display, default_unraisable = sys.__excepthook__, sys.__unraisablehook__

    # Preloaded for the script (their cost: docs/PERFORMANCE.md). They are only
    # in sys.modules; none is bound in the script's namespace. Not
    # subprocess: no sandbox can start a process (fork is killed, pipe2
    # refused), and its imports (threading, selectors, locale, signal)
    # cost a cold run about 9 ms for a module that can only fail.
    import json  # noqa: F401
    import re  # noqa: F401
    import hashlib  # noqa: F401
    # The builtin compile() creates the interpreter's AST classes on its
    # first call (about 1.5 ms on the project's machine), and the script is
    # compiled with it below: one call now moves that cost out of the
    # request. The script finds the same classes either way.
    compile("", "<string>", "exec", dont_inherit=True)

    # What the ending needs, taken before the script can change it. gc and
    # atexit keep their state in the interpreter, so they leave sys.modules
    # as a cold interpreter has it.
    modules = sys.modules
    import gc
    import atexit
    for name in ("gc", "atexit"):
        del modules[name]
    import _weakref
    import _io
    import signal
    # The ending's checks read these modules' state (the warnings filters,
    # the weak sets' callbacks); loaded here, they stay for the script.
    import warnings  # noqa: F401
    import _weakrefset  # noqa: F401
    set_signal, SIGINT, SIG_DFL = signal.signal, signal.SIGINT, signal.SIG_DFL
    type_dict = type.__dict__["__dict__"].__get__
    type_mro = type.__dict__["__mro__"].__get__
    type_flags = type.__dict__["__flags__"].__get__
    ref_type = _weakref.ReferenceType
    ref_callback = ref_type.__dict__["__callback__"].__get__
    proxies = (_weakref.ProxyType, _weakref.CallableProxyType)
    gen_type = type((lambda: (yield))())
    function_type = type(_awf_bootstrap)
    builtin_type = type(len)
    weakset_type = modules["_weakrefset"].WeakSet
    weakset_remove = weakset_type.__init__.__code__.co_consts
    weakset_remove = [c for c in weakset_remove if getattr(c, "co_name", "") == "_remove"][0]
    weakset_start = tuple(type_dict(weakset_type).items())
    raw_type = _io.FileIO
    buffered_types = (_io.BufferedWriter, _io.BufferedReader, _io.BufferedRandom)
    memory_io = (_io.BytesIO, _io.StringIO)
    std = (sys.stdin, sys.stdout, sys.stderr)
    std_ids = set()
    for f in std:
        std_ids.update((id(f), id(f.buffer), id(f.buffer.raw)))
    gc_garbage, gc_callbacks = gc.garbage, gc.callbacks
    # The warnings filters as they start: ResourceWarning ignored.
    warnings = modules["warnings"]
    warn_filters = warnings.filters
    warn_start = tuple(warn_filters)

    def fd_state(fd):
        try:
            st = fstat(fd)
            return (st.st_dev, st.st_ino, st.st_mode, get_blocking(fd))
        except OSError:
            return None

    std_fds = (fd_state(1), fd_state(2))
    # The type of sys.unraisablehook's argument, to report an error the way
    # the interpreter does where it would (it has no other public name).
    seen = []
    sys.unraisablehook = seen.append
    probe = set()
    probe_ref = _weakref.ref(probe, len)
    del probe
    sys.unraisablehook = sys.__unraisablehook__
    hook_args = type(seen[0])
    del seen, probe_ref
    from itertools import compress
    meta_subclasses = type.__dict__["__subclasses__"]
    GC_FLAG = 1 << 14  # Py_TPFLAGS_HAVE_GC
    io_types = (raw_type, _io.TextIOWrapper) + buffered_types + memory_io
    with os.scandir("/") as it:
        scandir_type = type(it)
    del it
    fin_cache = {}

    def finaliser(t):
        # Whether instances of class t have a finaliser: __del__ in its MRO
        # (a class's, or a C type's tp_finalize). Cached by id, so that the
        # cache holds no class; quiet() starts it afresh.
        r = fin_cache.get(id(t))
        if r is None:
            r = any("__del__" in type_dict(k) for k in type_mro(t))
            fin_cache[id(t)] = r
        return r

    # Any audit hook the script adds raises this event on the way in; the
    # bootstrap's own hook records it (it stores nothing else).
    audit_added = {"sys.addaudithook": None}
    sys.addaudithook(audit_added.pop)

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

    main = modules["__main__"]
    g = main.__dict__
    builtins = g["__builtins__"]
    # The loader class a script's __main__ gets, from the module the
    # interpreter has already imported (importlib.machinery would add more).
    loader = modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
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
    sysdict = sys.__dict__
    missing = object()
    del buf, head, rest, parts, chunk, main, loader, builtins, f, name

    def write_stderr(text):
        # PySys_WriteStderr: sys.stderr.write, else the C stream.
        try:
            sysdict["stderr"].write(text)
        except BaseException:
            write(2, text.encode("utf-8", "backslashreplace"))

    def flush_io():
        # What the interpreter does right after running a file.
        for name in ("stderr", "stdout"):
            try:
                sysdict[name].flush()
            except BaseException:
                pass

    def exit_status(e):
        # The status _Py_HandleSystemExit gives a plain SystemExit: None is
        # 0, an int is its C int (one beyond a C long is -1), anything else
        # is printed and is 1.
        code = e.code
        if code is None:
            return 0
        if issubclass(type(code), int):
            n = int.__add__(code, 0)
            if not -(1 << 63) <= n < 1 << 63:
                n = -1
            return n & 0xFF
        return 1

    def report(e, tb):
        # PyErr_Print of an uncaught exception. It returns the SystemExit
        # the hook raised, if it did; the interpreter then exits with it.
        t = type(e)
        sys.last_type, sys.last_value, sys.last_traceback = t, e, tb
        hook = sysdict.get("excepthook", missing)
        try:
            audit("sys.excepthook", None if hook is missing else hook, t, e, tb)
        except RuntimeError:
            return None
        except BaseException as x:
            args = hook_args((type(x), x, x.__traceback__.tb_next, "Exception ignored in audit hook", None))
            unraisable_hook = sysdict.get("unraisablehook")
            try:
                unraisable_hook(args)
            except BaseException:
                default_unraisable(args)
        if hook is missing:
            write_stderr("sys.excepthook is missing\n")
            display(t, e, tb)
            return None
        err = None
        try:
            hook(t, e, tb)
        except SystemExit as x:
            x.__traceback__ = None
            return x
        except BaseException as x:
            x.__traceback__ = x.__traceback__.tb_next
            err = x
        if err is not None:
            write_stderr("Error in sys.excepthook:\n")
            display(type(err), err, err.__traceback__)
            write_stderr("\nOriginal exception was:\n")
            display(t, e, tb)
        return None

    def quiet_io(o, t):
        # A file whose finaliser would do nothing: closed, or in memory.
        if any(t is m for m in memory_io):
            return True
        try:
            if t is _io.TextIOWrapper:
                o = o.buffer
                t = type(o)
            if any(t is b for b in buffered_types):
                o = o.raw
                t = type(o)
            return t is raw_type and o.closed
        except ValueError:  # detached
            return False

    def quiet_callback(cb):
        t = type(cb)
        if t is builtin_type:
            # _abc's registries: the callback drops a dead entry.
            return cb.__name__ == "_destroy" and type(cb.__self__) is ref_type
        if t is function_type and cb.__code__ is weakset_remove:
            # Its owner comes in a default argument, a weak reference.
            selfref = cb.__defaults__
            if type(selfref) is not tuple or len(selfref) != 1 or type(selfref[0]) is not ref_type:
                return False
            owner = selfref[0]()
            return owner is None or (type(owner) is weakset_type and type(owner.data) is set)
        return False

    def quiet():
        # Whether nothing is left whose teardown the script could observe.
        if "sys.addaudithook" not in audit_added:
            return False
        if gettrace() is not None or getprofile() is not None:
            return False
        if len(current_frames()) != 1:
            return False
        if sysdict.get("stdout") is not std[1] or sysdict.get("stderr") is not std[2]:
            return False
        if sysdict.get("__stdout__") is not std[1] or sysdict.get("__stderr__") is not std[2]:
            return False
        if None in std_fds or (fd_state(1), fd_state(2)) != std_fds or not std_fds[0][3] or not std_fds[1][3]:
            return False
        if gc.get_debug() or gc_garbage or gc_callbacks:
            return False
        if "_socket" in modules or "_sqlite3" in modules:
            return False
        if modules.get("warnings") is not warnings or warnings.__dict__.get("filters") is not warn_filters:
            return False
        now = tuple(warn_filters)
        if len(now) != len(warn_start) or any(a is not b for a, b in zip(now, warn_start)):
            return False
        now = tuple(type_dict(weakset_type).items())
        if len(now) != len(weakset_start) or any(a[0] is not b[0] or a[1] is not b[1] for a, b in zip(now, weakset_start)):
            return False
        fin_cache.clear()
        # Classes are hashed by address below, in C loops: no metaclass
        # may hash or compare them with code of its own.
        metas, i = [type], 0
        while i < len(metas):
            for m in meta_subclasses.__get__(metas[i])():
                for k in type_mro(m):
                    if k is not type and k is not object and ("__hash__" in type_dict(k) or "__eq__" in type_dict(k)):
                        return False
                metas.append(m)
            i += 1
        objs = gc.get_objects()
        kinds = set(map(type, objs))
        # Each kind's check, decided once per kind: 1 its instances are
        # classes, 2 weak references, 3 generators, 4 files.
        watch = {}
        for t in kinds:
            if any(t is m for m in metas):
                watch[t] = 1
            elif finaliser(t):
                if t is gen_type:
                    watch[t] = 3
                elif any(t is k for k in io_types):
                    watch[t] = 4
                else:
                    return False
            elif t is proxies[0] or t is proxies[1]:
                return False
            elif issubclass(t, ref_type):
                watch[t] = 2
        for o in compress(objs, map(watch.__contains__, map(type, objs))):
            check = watch[type(o)]
            if check == 1:
                # A class whose instances the collector does not track, with a
                # finaliser: they cannot be counted. The os.scandir iterator's
                # only closes its directory and warns (ignored, as checked).
                if not type_flags(o) & GC_FLAG and finaliser(o) and o is not scandir_type:
                    return False
            elif check == 2:
                cb = ref_callback(o)
                if cb is not None and not quiet_callback(cb):
                    return False
            elif check == 3:
                if o.gi_frame is not None:
                    return False
            elif id(o) not in std_ids and not quiet_io(o, type(o)):
                return False
        return True

    def flush_std():
        # flush_std_files, for the unchanged standard streams; False when
        # a flush fails (the interpreter then does it again, and reports).
        for f in std[1:]:
            if not f.closed:
                try:
                    f.flush()
                except BaseException:
                    return False
        return True

    # ending[0] is the exit status once the script is over and the
    # interpreter ends as it would after a file (None: leave the ending to
    # it); ending[1] is set after an uncaught KeyboardInterrupt.
    ending = [None, False]

    def end():
        # The first atexit callback registered, so the last to run: the
        # interpreter has joined the threads and run the script's
        # callbacks. If nothing it would still do can be observed, end
        # here; otherwise return and let it finalise.
        status, sigint = ending
        ending[0] = None
        if status is None:
            return
        enabled = gc.isenabled()
        gc.disable()
        try:
            fast = quiet()
        except BaseException:
            fast = False
        if not (fast and flush_std()):
            if enabled:
                gc.enable()
            return
        if sigint:
            # As the interpreter ends after an uncaught KeyboardInterrupt.
            set_signal(SIGINT, SIG_DFL)
            kill(getpid(), SIGINT)
            status = 130
        _exit(status)

    atexit.register(end)
    exc = None
    try:
        exec(compile(source, path, "exec", dont_inherit=True), g)
    except BaseException as e:
        exc = e
    del source
    flush_io()
    if exc is None:
        ending[0] = 0
    elif issubclass(type(exc), SystemExit):
        # The interpreter reports it and exits with its status.
        if type(exc) is SystemExit:
            ending[0] = exit_status(exc)
        raise exc
    else:
        # Drop this function's own frame, as if the script had been the
        # interpreter's main module.
        tb = exc.__traceback__.tb_next
        exc.__traceback__ = tb
        hook_exit = report(exc, tb)
        if hook_exit is not None:
            del exc, tb
            if type(hook_exit) is SystemExit:
                ending[0] = exit_status(hook_exit)
            raise hook_exit
        if type(exc) is KeyboardInterrupt:
            ending[1] = True
            ending[0] = 1
            # The interpreter ends by SIGINT only after a KeyboardInterrupt
            # left its main module: raise it again, with a hook that undoes
            # what PyErr_Print changes and prints nothing (the report is
            # written).
            hook = sysdict.get("excepthook", missing)
            last = (sys.last_type, sys.last_value, sys.last_traceback)

            def restore(*_):
                if hook is missing:
                    del sys.excepthook
                else:
                    sys.excepthook = hook
                sys.last_type, sys.last_value, sys.last_traceback = last
                last[1].__traceback__ = last[2]

            sys.excepthook = restore
            g.pop("__file__", None)
            g.pop("__cached__", None)
            del g, tb
            raise exc
        ending[0] = 1
    g.pop("__file__", None)
    g.pop("__cached__", None)
    if exc is not None:
        del exc, tb, g
        raise SystemExit(1)


_awf_bootstrap()
