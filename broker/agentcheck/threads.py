# The load of the counters probe: a sandbox that starts 1,000 threads, all
# alive at once, then lets them end. On a host whose agent view is live,
# this moves /proc/stat (processes, ctxt, cpu times), /proc/loadavg (running
# tasks, last pid), /proc/meminfo, /proc/vmstat and friends.
import json
import threading

N = 1000
threading.stack_size(256 * 1024)
release = threading.Event()
threads = []
for _ in range(N):
    t = threading.Thread(target=release.wait, daemon=True)
    t.start()
    threads.append(t)
release.set()
for t in threads:
    t.join()
with open("/query/out", "w") as f:
    json.dump({"threads": len(threads)}, f)
