fds, err = [], "ok"
try:
    while len(fds) < 2 * <% .Limits.NoFile %> + 16:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    err = oserr(e)
n = len(fds)
for fd in fds:
    os.close(fd)
answer({"err": err, "within_limit": n <= <% .Limits.NoFile %>})
