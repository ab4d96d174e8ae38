import shutil
dst = "/tmp/awf-verify-exec"
copy = attempt("copy", lambda: shutil.copyfile("/usr/bin/python3", dst))
chmod = attempt("chmod", lambda: os.chmod(dst, 0o755)) if copy == "ok" else "other"
res = {"copy": copy, "chmod": chmod, "exec": "other"}
if copy == "ok":
    code = "import json; json.dump(" + json.dumps(dict(res, exec="ok")) + ", open(" + repr(OUT) + ", 'w'), separators=(',', ':'))"
    res["exec"] = attempt("exec", lambda: os.execv(dst, [dst, "-I", "-S", "-c", code]))
answer(res)
