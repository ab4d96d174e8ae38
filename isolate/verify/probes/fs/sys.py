def firmware():
    if not os.listdir("/sys/firmware"):
        raise OSError(errno.ENOENT, "empty")
answer({"thp": attempt("thp", write_open("/sys/kernel/mm/transparent_hugepage/enabled")),
        "cgroup": attempt("cgroup", lambda: os.mkdir("/sys/fs/cgroup/awf-verify-probe")),
        "firmware": attempt("firmware", firmware)})
