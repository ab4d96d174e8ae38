r, v = sysc("unshare", 0x10000000)
answer({"unshare": r})
