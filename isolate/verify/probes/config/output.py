with open(OUT, "w") as f:
    f.write(" " * (<% .Limits.OutputBytes %> + 1) + "true")
