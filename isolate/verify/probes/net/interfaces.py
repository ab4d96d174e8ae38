names = []
state = "unreadable"
try:
    with open("/proc/net/dev") as f:
        lines = f.read().splitlines()[2:]
    names = sorted(l.split(":")[0].strip() for l in lines if ":" in l)
    state = "none" if not names else ("lo-only" if names == ["lo"] else "other")
except OSError:
    pass
answer({"state": state, "count": min(len(names), 64)})
