paths = []
try:
    with open("/proc/self/cgroup") as f:
        paths = [l.rstrip("\n").split(":", 2)[2] for l in f if l.count(":") >= 2]
except OSError:
    pass
answer({"lines": min(len(paths), 64), "root_only": all(p == "/" for p in paths)})
