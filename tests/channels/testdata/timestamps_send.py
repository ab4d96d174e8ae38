# Sender of the timestamp channel test: sleeps the secret number of
# milliseconds, so the moment the sandbox ends is the secret. The answer
# itself is const; only a trace of the end time could carry the secret.
import time

time.sleep(int(open("/query/repo/secret").read().strip()) / 1000.0)
open("/query/out", "w").write("1")
