with open(OUT, "w") as f:
    f.write(" " * (64 << 10) + "true")
