nnp = -1
try:
    with open("/proc/self/status") as f:
        for l in f:
            if l.startswith("NoNewPrivs:"):
                nnp = int(l.split()[1])
except OSError:
    nnp = -2
answer({"nnp": nnp})
