paths = <% .HostOnly | py %>
seen = [i for i, p in enumerate(paths) if os.path.lexists(p)]
answer({"visible": len(seen), "first": seen[0] if seen else -1})
