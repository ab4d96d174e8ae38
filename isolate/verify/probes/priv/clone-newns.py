import ctypes, struct
r1, v = sysc("clone", 0x10000000 | 0x00020000 | 17, 0, 0, 0, 0)
if r1 == "ok" and v == 0:
    os._exit(0)
if r1 == "ok":
    try: os.waitpid(v, 0)
    except OSError: pass
args = ctypes.create_string_buffer(struct.pack("QQQQQQQQ", 0x10000000, 0, 0, 0, 17, 0, 0, 0))
r2, v = sysc("clone3", args, 64)
if r2 == "ok" and v == 0:
    os._exit(0)
if r2 == "ok":
    try: os.waitpid(v, 0)
    except OSError: pass
answer({"clone": r1, "clone3": r2})
