allowed = (QUERY, "/tmp", "/dev/shm", "/dev/mqueue", "/proc", "/sys")
def under(p, roots):
    return any(p == r or p.startswith(r + "/") for r in roots)
dirs = {"/"}
for top in os.listdir("/"):
    p = "/" + top
    if os.path.isdir(p) and not os.path.islink(p) and not under(p, allowed):
        dirs.add(p)
        for p2, e in walk_names(p, skip=()):
            if e.is_dir(follow_symlinks=False) and not under(p2, allowed):
                dirs.add(p2)
try:
    with open("/proc/self/mountinfo") as f:
        for l in f:
            mp = l.split()[4]
            if not under(mp, allowed) and os.path.isdir(mp):
                dirs.add(mp)
except OSError:
    pass
tops = ["/", "/etc", "/usr", "/lib", "/lib64", "/dev", "/awf", "/var", "/run", "/home", "/root"]
writable = []
for d in sorted(dirs):
    p = os.path.join(d, ".awf-verify-probe")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(p)
        writable.append(d)
    except OSError:
        pass
first = "none"
if writable:
    t = "/" + writable[0].split("/")[1] if writable[0] != "/" else "/"
    first = t if t in tops else "other"
answer({"checked": min(len(dirs), 4096), "writable": min(len(writable), 64), "first": first})
