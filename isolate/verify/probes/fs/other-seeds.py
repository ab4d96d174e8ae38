name = <% .OtherMarker | py %>
found = any(e.name == name for p, e in walk_names("/"))
answer({"found": found})
