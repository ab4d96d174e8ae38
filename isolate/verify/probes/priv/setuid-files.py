import stat
n = 0
for p, e in walk_names("/"):
    try:
        m = os.lstat(p).st_mode
    except OSError:
        continue
    if stat.S_ISREG(m) and m & (stat.S_ISUID | stat.S_ISGID):
        n += 1
answer({"setid": min(n, 64)})
