names = set(<% .TokenNames | py %>)
pfx = <% .TokenPrefixes | py %>
sfx = <% .TokenSuffixes | py %>
bad = [k for k in os.environ if k.upper() in names or any(k.upper().startswith(p) for p in pfx) or any(k.upper().endswith(s) for s in sfx)]
answer({"credentials": min(len(bad), 64), "vars": min(len(os.environ), 64)})
