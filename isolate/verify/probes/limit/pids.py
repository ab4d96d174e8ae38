import threading
ev = threading.Event()
ts = []
step("threads")
while len(ts) < <% .ThreadCap %>:
    t = threading.Thread(target=ev.wait, daemon=True)
    t.start()
    ts.append(t)
ev.set()
answer({"threads": len(ts)})
