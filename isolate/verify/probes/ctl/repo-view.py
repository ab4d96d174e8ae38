marker = False
try:
    with open(os.path.join(REPO, <% .SeedMarker | py %>)) as f:
        marker = f.read() == <% .SeedValue | py %>
except OSError:
    pass
try:
    entries = min(len(os.listdir(REPO)), 64)
except OSError:
    entries = 0
def create():
    with open(os.path.join(REPO, "new-file.txt"), "w") as f:
        f.write("x")
answer({"marker": marker, "entries": entries, "create": attempt("create", create)})
