import stat
ok = {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx"}
named = <% .DevNames | py %>
extra, mask = 0, 0
for p, e in walk_names("/dev", skip=()):
    try:
        m = os.lstat(p).st_mode
    except OSError:
        continue
    if (stat.S_ISCHR(m) or stat.S_ISBLK(m)) and e.name not in ok and not p.startswith("/dev/pts/"):
        extra += 1
        if p[5:] in named:
            mask |= 1 << named.index(p[5:])
def mem():
    with open("/dev/mem", "rb") as f:
        f.read(1)
answer({"extra_nodes": min(extra, 64), "named": mask, "mem": attempt("mem", mem)})
