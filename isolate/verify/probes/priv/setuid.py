answer({"setuid": attempt("setuid", lambda: os.setuid(0)), "setgid": attempt("setgid", lambda: os.setgid(0))})
