import time
time.sleep(1.0)
answer({"alive": True})
