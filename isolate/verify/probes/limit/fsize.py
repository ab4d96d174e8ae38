step("write")
with open(os.path.join(REPO, "big"), "wb") as f:
    for i in range(32):
        f.write(b"\0" * (64 << 10))
        f.flush()
answer({"written": True})
