def wr(p):
    def f():
        fd = os.open(p, os.O_WRONLY)
        m = masked(fd)
        os.close(fd)
        return "masked" if m else None
    return f
answer({"hostname": attempt("hostname", wr("/proc/sys/kernel/hostname")),
        "drop_caches": attempt("drop_caches", wr("/proc/sys/vm/drop_caches")),
        "sysrq": attempt("sysrq", wr("/proc/sysrq-trigger"))})
