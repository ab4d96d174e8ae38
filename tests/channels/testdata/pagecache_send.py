# Sender (confidential repository, const schema): make pages first+i*stride
# and first+i*stride+stride/2 of a rarely read rootfs file resident when
# secret bit i is 1 and evict them when it is 0 (two copies: the probe-based
# receivers read the first, the timing receiver the second, because a
# preadv2(RWF_NOWAIT) miss starts readahead and would warm a page before
# it is timed). The suite evicted the whole file before the run, so reading alone
# carries the bits even when fadvise is refused. PARAMS["killed"] names the
# system calls the published policy kills; the script never makes those.
import os

KILLED = set(PARAMS["killed"])

secret = int(open("/query/repo/secret").read().strip(), 16)
fd = os.open(PARAMS["file"], os.O_RDONLY)
for i in range(PARAMS["bits"]):
    for off in ((PARAMS["first"] + i * PARAMS["stride"]) * 4096,
                (PARAMS["first"] + i * PARAMS["stride"] + PARAMS["stride"] // 2) * 4096):
        if (secret >> i) & 1:
            os.pread(fd, 1, off)
        elif "fadvise64" not in KILLED:
            try:
                os.posix_fadvise(fd, off, 4096, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
open("/query/out", "w").write("1")
