res = {"proc": "ok", "batch": -1, "ino": -1}
try:
    step("stat")
    res["ino"] = min(os.stat("/proc/self/").st_ino, 1 << 32)
    for i in range(3 * 1024):
        fd = os.open("/dev/null", os.O_RDONLY)
        try:
            ino = os.lstat("/proc/self/fd/%d" % fd).st_ino
        finally:
            os.close(fd)
        try:
            os.lstat("/proc/self/fd/%d" % fd)  # drops the entry: the next lookup is fresh
        except OSError:
            pass
        res["ino"] = min(ino, 1 << 32)
        if ino % 1024 == 1:
            res["batch"] = ino - 1
            break
except OSError as e:
    res["proc"] = oserr(e)
answer(res)
