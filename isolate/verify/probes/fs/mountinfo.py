text = ""
try:
    with open("/proc/self/mountinfo") as f:
        text = f.read()
except OSError:
    pass
prefixes = <% .HostPrefixes | py %>
lines = text.splitlines()
answer({"mounts": min(len(lines), 64),
        "other_seed": <% .OtherMarker | py %> in text,
        "sibling": <% .SiblingMarker | py %> in text,
        "host_paths": min(sum(1 for l in lines if any(p in l for p in prefixes)), 64)})
