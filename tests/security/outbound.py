"""What the outbound-address tests share: URLs a customer or reseller may give that must never
make the portal or its workers connect into our own network (the issue 28 sweep's list, and the
tricks around it), and a loopback listener that counts who reached it."""

import socket

import pytest

HOSTILE_URLS = [
    "http://127.0.0.1:9000", "http://localhost:6379", "http://[::1]:9000", "http://0.0.0.0:9000",
    "http://169.254.169.254/latest/meta-data/", "https://169.254.169.254/latest/meta-data/",
    "https://[::ffff:169.254.169.254]", "https://[::ffff:127.0.0.1]:9000", "https://10.0.0.5",
    "https://192.168.0.10", "https://172.16.3.4", "https://100.64.0.1", "https://[fd00::1]",
    "https://[fe80::1]", "https://224.0.0.1", "https://240.0.0.1",
    "https://2130706433:9000",  # 127.0.0.1 written as one number
    "https://0x7f.1:9000",  # and in hex
    "https://[2002:a9fe:a9fe::1]",  # 6to4 around 169.254.169.254
    "https://[64:ff9b::a9fe:a9fe]",  # NAT64 around it
    "https://user:pw@s3.example.com", "https://key@s3.example.com",
    "http://s3.example.com",  # plain http to a public name
    "file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO", "ftp://s3.example.com",
]


class Listener:
    """A service on loopback (think Redis); ``connections()`` counts who reached it."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.socket.setblocking(False)
        self.port = self.socket.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.socket.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.socket.close()
