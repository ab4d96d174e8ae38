import socket
name = <% .Abstract | py %>
res = {"socket": "ok", "connect": "other", "listed": "unreadable"}
try:
    with open("/proc/net/unix") as f:
        res["listed"] = "visible" if any(l.split()[-1] == "@" + name for l in f.read().splitlines()[1:] if l.split()) else "hidden"
except OSError:
    pass
try:
    step("socket")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    res["connect"] = attempt("connect", lambda: s.connect("\0" + name))
except OSError as e:
    res["socket"] = oserr(e)
answer(res)
