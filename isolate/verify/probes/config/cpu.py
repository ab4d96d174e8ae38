import hashlib, threading, time
# Enough threads to want more CPU than the quota: hashlib releases the GIL
# while it hashes a large buffer, so the threads really run in parallel.
# The answer is the CPU time the script's own clock saw per second of wall
# time (all threads), in milli-CPUs, and how many CPUs it may run on.
cpus = len(os.sched_getaffinity(0))
want = <% .Limits.CPUMilli %> // 1000 + 1
buf = b"\x01" * (1 << 20)
stop = threading.Event()
def spin():
    while not stop.is_set():
        hashlib.sha256(buf).digest()
ts = [threading.Thread(target=spin, daemon=True) for _ in range(want)]
step("spin")
w0, c0 = time.monotonic(), time.process_time()
for t in ts:
    t.start()
time.sleep(2.0)
stop.set()
for t in ts:
    t.join()
w, c = time.monotonic() - w0, time.process_time() - c0
answer({"milli": max(0, min(100000, int(1000 * c / w))), "cpus": min(cpus, 4096), "threads": want})
