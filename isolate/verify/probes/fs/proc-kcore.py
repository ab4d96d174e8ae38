def rd(p):
    def f():
        with open(p, "rb") as fh:
            if masked(fh.fileno()):
                return "masked"
            if not fh.read(16):
                raise OSError(errno.ENOENT, "empty")
    return f
answer({"kcore": attempt("kcore", rd("/proc/kcore")), "kmsg": attempt("kmsg", rd("/proc/kmsg")),
        "timer_list": attempt("timer_list", rd("/proc/timer_list"))})
