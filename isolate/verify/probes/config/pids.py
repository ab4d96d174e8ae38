import threading
ev = threading.Event()
ts = []
step("threads")
while len(ts) < 2 * <% .Limits.Pids %>:
    t = threading.Thread(target=ev.wait, daemon=True)
    t.start()
    ts.append(t)
ev.set()
answer({"threads": min(len(ts), 1 << 20)})
