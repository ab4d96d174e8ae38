err, n = open_devnull(4096)
answer({"err": err, "within_limit": n <= <% .Limits.NoFile %>})
