try:
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    r, v = sysc("setns", fd, 0)
except OSError as e:
    r = oserr(e)
answer({"setns": r})
