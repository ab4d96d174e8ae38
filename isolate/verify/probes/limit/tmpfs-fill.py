def fill(d, cap):
    n, i, err = 0, 0, "ok"
    try:
        while n < cap:
            with open(os.path.join(d, "fill-%d" % i), "wb") as f:
                f.write(b"\1" * (256 << 10))
            n += 256 << 10
            i += 1
    except OSError as e:
        err = oserr(e)
    for j in range(i + 1):
        try: os.unlink(os.path.join(d, "fill-%d" % j))
        except OSError: pass
    return err, n
cap = 4 * <% .Limits.TmpTmpfsBytes %>
step("tmp")
te, tn = fill("/tmp", cap)
step("query")
qe, qn = fill(QUERY, cap)
answer({"tmp": te, "tmp_within": tn <= <% .Limits.TmpTmpfsBytes %>, "query": qe, "query_within": qn <= <% .Limits.QueryTmpfsBytes %>})
