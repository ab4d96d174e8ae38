answer({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(), "groups": min(len([g for g in os.getgroups() if g != 65534]), 64)})
