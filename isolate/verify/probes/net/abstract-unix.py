import socket
name = <% .Abstract | py %>
listed = "unreadable"
try:
    with open("/proc/net/unix") as f:
        listed = "visible" if any(l.split()[-1] == "@" + name for l in f.read().splitlines()[1:] if l.split()) else "hidden"
except OSError:
    pass
res = connect(socket.AF_UNIX, "\0" + name)
res["listed"] = listed
answer(res)
