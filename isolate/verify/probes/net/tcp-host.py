import socket
answer(connect(socket.AF_INET, ("127.0.0.1", <% .TCP4Port %>)))
