def modify():
    with open(os.path.join(REPO, "README.md"), "a") as f:
        f.write("changed\n")
def subdir():
    with open(os.path.join(REPO, "src", "new.py"), "w") as f:
        f.write("x")
def delete():
    os.unlink(os.path.join(REPO, "src", "data.json"))
answer({"modify": attempt("modify", modify), "subdir": attempt("subdir", subdir), "delete": attempt("delete", delete)})
