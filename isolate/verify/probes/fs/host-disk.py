paths = <% .DiskPaths | py %>
host = set(tuple(d) for d in <% .HostDisks | py %>)
mask = 0
for i, p in enumerate(paths):
    try:
        s = os.statvfs(p)
    except OSError:
        continue
    if (s.f_blocks, s.f_files, s.f_bsize) in host:
        mask |= 1 << i
answer({"mask": mask})
