step("write")
with open(os.path.join(REPO, "big"), "wb") as f:
    left = <% .Limits.FileSizeBytes %> + (1 << 20)
    while left > 0:
        n = min(left, 64 << 10)
        f.write(b"\0" * n)
        f.flush()
        left -= n
answer({"written": True})
