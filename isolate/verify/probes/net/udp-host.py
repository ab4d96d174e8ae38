import socket
res = {"socket": "ok", "send": "other", "reply": False}
try:
    step("socket")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    res["send"] = attempt("send", lambda: s.sendto(b"awf-verify-ping", ("127.0.0.1", <% .UDPPort %>)))
    if res["send"] == "ok":
        try:
            res["reply"] = s.recvfrom(64)[0] == b"awf-verify-pong"
        except OSError:
            pass
except OSError as e:
    res["socket"] = oserr(e)
answer(res)
