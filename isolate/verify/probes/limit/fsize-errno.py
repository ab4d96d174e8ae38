n = 0
err = "ok"
try:
    step("write")
    with open(os.path.join(REPO, "big"), "wb", buffering=0) as f:
        while n < (2 << 20):
            n += f.write(b"\0" * (64 << 10))
except OSError as e:
    err = oserr(e)
answer({"err": err, "within_limit": n <= <% .Limits.FileSizeBytes %>})
