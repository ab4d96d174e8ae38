step("spin")
while True:
    pass
