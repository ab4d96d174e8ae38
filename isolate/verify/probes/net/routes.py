def count(p, skip, dev, flags):
    n = 0
    try:
        with open(p) as f:
            for l in f.read().splitlines()[skip:]:
                c = l.split()
                if len(c) > max(dev, flags) and c[dev] != "lo" and not int(c[flags], 16) & 0x0200:
                    n += 1
    except OSError:
        return -1
    return min(n, 64)
answer({"v4": count("/proc/net/route", 1, 0, 3), "v6": count("/proc/net/ipv6_route", 0, 9, 8)})
