def w(p):
    def f():
        with open(p, "w") as fh:
            fh.write("x")
        os.unlink(p)
    return f
answer({"query": attempt("query", w(os.path.join(QUERY, "scratch"))), "tmp": attempt("tmp", w("/tmp/scratch"))})
