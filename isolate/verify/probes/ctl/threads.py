import threading, hashlib, re
res = []
def work(i):
    res.append(hashlib.sha256(str(i).encode()).hexdigest()[:4])
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
answer({"threads": len(res), "re": bool(re.match(r"^[0-9a-f]{4}$", res[0]))})
