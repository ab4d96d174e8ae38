r, v = sysc("getpid")
answer({"getpid": r})
