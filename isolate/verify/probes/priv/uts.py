answer({"same": os.uname().nodename == <% .Hostname | py %>})
