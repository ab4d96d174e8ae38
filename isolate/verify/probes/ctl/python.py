answer({"ran": True, "cwd": os.getcwd() == QUERY})
