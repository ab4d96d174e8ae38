answer({"chroot": attempt("chroot", lambda: os.chroot("/tmp"))})
