err, n = open_devnull(2 * <% .Limits.NoFile %> + 16)
answer({"err": err, "within_limit": n <= <% .Limits.NoFile %>})
