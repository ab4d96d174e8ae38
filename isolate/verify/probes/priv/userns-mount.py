r, v = sysc("unshare", 0x10000000 | 0x00020000)
m = "other"
if r == "ok":
    m, v = sysc("mount", b"none", b"/tmp", b"tmpfs", 0, None)
answer({"unshare": r, "mount": m})
