import socket
answer(connect(socket.AF_INET6, ("::1", <% .TCP6Port %>)))
