def wr(p):
    def f():
        fd = os.open(p, os.O_WRONLY)
        m = masked(fd)
        os.close(fd)
        return "masked" if m else None
    return f
def firmware():
    if not os.listdir("/sys/firmware"):
        raise OSError(errno.ENOENT, "empty")
answer({"thp": attempt("thp", wr("/sys/kernel/mm/transparent_hugepage/enabled")),
        "cgroup": attempt("cgroup", lambda: os.mkdir("/sys/fs/cgroup/awf-verify-probe")),
        "firmware": attempt("firmware", firmware)})
