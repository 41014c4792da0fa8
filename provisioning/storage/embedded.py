"""A real S3 + IAM HTTP server on loopback (moto in server mode) for ``make run``, tests and the
bench. After set-up it enforces IAM authorisation: every request must be signed by a known key
and allowed by that key's policies, so a bucket-scoped key is really refused elsewhere.

    s3 = start_embedded_s3()          # http://127.0.0.1:<port>, admin key ready
    settings_for = s3.provider_settings()  # a STORAGE_PROVIDERS entry using the IAM adapter
    s3.stop()
"""

from __future__ import annotations

import json
import logging
import urllib.request
from dataclasses import dataclass, field

from provisioning.storage.s3ops import make_client

ADMIN_USER = "trainyard-admin"
ADMIN_POLICY = {"Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass
class EmbeddedS3:
    endpoint_url: str
    access_key: str
    secret_key: str = field(repr=False)
    enforcing: bool
    _server: object = field(repr=False, default=None)

    def provider_settings(self, *, canary_bucket: str = "trainyard-canary") -> dict:
        """An entry for settings.STORAGE_PROVIDERS: the on-site provider served by this server."""
        return {"adapter": "provisioning.storage.iam.IamProvider", "endpoint_url": self.endpoint_url,
                "access_key": self.access_key, "secret_key": self.secret_key,
                "options": {"iam_endpoint_url": self.endpoint_url, "canary_bucket": canary_bucket}}

    def set_enforcing(self, on: bool) -> None:
        _reset_auth(self.endpoint_url, 0 if on else float("inf"))
        self.enforcing = on

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def start_embedded_s3(*, host: str = "127.0.0.1", port: int = 0, enforce_auth: bool = True) -> EmbeddedS3:
    """Starts moto's ThreadedMotoServer (port 0: a free one), creates an admin IAM user with an
    access key, then (enforce_auth) turns IAM authorisation on for every later request."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    bound_host, bound_port = server.get_host_and_port()
    endpoint = f"http://{bound_host}:{bound_port}"
    _reset_auth(endpoint, float("inf"))  # set-up runs unauthenticated
    access_key, secret_key = _bootstrap_admin(endpoint)
    s3 = EmbeddedS3(endpoint_url=endpoint, access_key=access_key, secret_key=secret_key,
                    enforcing=False, _server=server)
    if enforce_auth:
        s3.set_enforcing(True)
    return s3


def _bootstrap_admin(endpoint: str) -> tuple[str, str]:
    iam = make_client("iam", endpoint_url=endpoint, region="us-east-1",
                      access_key="bootstrap", secret_key="bootstrap")
    iam.create_user(UserName=ADMIN_USER)
    iam.put_user_policy(UserName=ADMIN_USER, PolicyName="admin",
                        PolicyDocument=json.dumps(ADMIN_POLICY))
    key = iam.create_access_key(UserName=ADMIN_USER)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def _reset_auth(endpoint: str, count: float) -> None:
    """moto's documented switch: after ``count`` more requests, authorisation is enforced."""
    body = str(count).encode()
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=body, method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=10) as response:
        json.loads(response.read())
