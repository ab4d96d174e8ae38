def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
fds = [fd for fd in range(4096) if is_open(fd)]
answer({"extra": min(len([fd for fd in fds if fd > 2]), 64)})
