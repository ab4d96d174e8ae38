tok = <% .PlantToken | py %>
found = any(e.name == tok for p, e in walk_names("/"))
for d in (QUERY, REPO, "/tmp", "/dev/shm"):
    found = found or os.path.lexists(os.path.join(d, tok))
answer({"found": found})
