name = <% .SiblingMarker | py %>
found = False
for p in (os.path.join(REPO, "..", name), os.path.join(REPO, "..", "..", name), "/" + name):
    found = found or os.path.lexists(p)
walked = 0
for p, e in walk_names("/"):
    walked += 1
    if e.name in (name, <% .SiblingDir | py %>):
        found = True
answer({"found": found, "walked": min(walked, 100000), "parent_is_query": os.path.realpath(os.path.join(REPO, "..")) == QUERY})
