mode, filters = 0, -1
try:
    with open("/proc/self/status") as f:
        for l in f:
            if l.startswith("Seccomp:"):
                mode = int(l.split()[1])
            elif l.startswith("Seccomp_filters:"):
                filters = min(int(l.split()[1]), 64)
except OSError:
    mode = -1
answer({"mode": mode, "filters": filters})
