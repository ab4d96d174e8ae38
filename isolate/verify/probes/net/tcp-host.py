import socket
res = {"socket": "ok", "connect": "other"}
try:
    step("socket")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    res["connect"] = attempt("connect", lambda: s.connect(("127.0.0.1", <% .TCP4Port %>)))
except OSError as e:
    res["socket"] = oserr(e)
    res["connect"] = "other"
answer(res)
