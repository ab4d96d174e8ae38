tgt = os.path.join(QUERY, "target")
with open(tgt, "w") as f:
    f.write('{"followed":true}')
try:
    step("symlink")
    os.symlink(tgt, OUT)
except OSError:
    os.unlink(tgt)
    answer({"followed": False})
