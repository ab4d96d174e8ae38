pids = [d for d in os.listdir("/proc") if d.isdigit()]
answer({"pids": min(len(pids), 64), "self": min(os.getpid(), 100000)})
