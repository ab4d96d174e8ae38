tok = <% .PlantToken | py %>
res = {}
for key, d in (("query", QUERY), ("repo", REPO), ("tmp", "/tmp")):
    def f(d=d):
        with open(os.path.join(d, tok), "w") as fh:
            fh.write(tok)
    res[key] = attempt(key, f)
answer(res)
