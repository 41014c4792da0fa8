"""The MinIO adapter's admin API calls against recorded exchanges (pytest-httpserver).

Documented pairs (MinIO admin API v3, as madmin-go / minio-py send them):
  PUT    /minio/admin/v3/add-service-account      body: sio-encrypted JSON {accessKey, secretKey,
         policy, description, status}  → 200, body: sio-encrypted JSON {"credentials": {...}}
  DELETE /minio/admin/v3/delete-service-account?accessKey=K   → 204
  errors → JSON {"Code": ..., "Message": ..., "Resource": ..., "RequestId": ...} with 403 /
         404 (XMinioAdminNoSuchServiceAccount) / 500 / 503 (XMinioServerNotInitialized)
Request and response bodies are encrypted with the admin secret key (argon2id + AES-GCM /
ChaCha20-Poly1305), so the fake server decrypts and encrypts with minio.crypto like MinIO does.
"""

import io
import json

import pytest
from minio.crypto import DecryptReader, encrypt
from pytest_httpserver import HTTPServer
from werkzeug import Response

from provisioning.drivers.base import DriverError
from provisioning.storage.base import IssuedCredential, ProviderConfig
from provisioning.storage.minio import MinioProvider

ADMIN_SECRET = "minio-admin-secret-123"
ADD = "/minio/admin/v3/add-service-account"
DELETE = "/minio/admin/v3/delete-service-account"
BUCKET = "trainyard-o-1234abcd"


class _Body(io.BytesIO):
    def release_conn(self):
        pass


def decrypt_body(data: bytes) -> dict:
    with DecryptReader(_Body(data), ADMIN_SECRET.encode()) as reader:
        return json.loads(b"".join(reader.stream()))


def error(status: int, code: str, message: str) -> Response:
    return Response(json.dumps({"Code": code, "Message": message, "Resource": ADD,
                                "RequestId": "17A0", "HostId": ""}), status=status,
                    content_type="application/json")


@pytest.fixture
def minio(httpserver: HTTPServer):
    return MinioProvider(ProviderConfig(
        slug="minio", kind="minio", endpoint_url=httpserver.url_for("").rstrip("/"),
        access_key="trainyard", secret_key=ADMIN_SECRET))


def test_issue_creates_a_service_account_scoped_to_the_bucket(httpserver: HTTPServer, minio):
    seen = {}

    def add(request):
        assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=trainyard/")
        seen.update(decrypt_body(request.get_data()))
        answer = {"credentials": {"accessKey": seen["accessKey"], "secretKey": seen["secretKey"],
                                  "expiration": "1970-01-01T00:00:00Z"}}
        return Response(encrypt(json.dumps(answer).encode(), ADMIN_SECRET),
                        content_type="application/octet-stream")

    httpserver.expect_oneshot_request(ADD, method="PUT").respond_with_handler(add)
    cred = minio.issue_credential(BUCKET)
    assert cred.access_key_id == seen["accessKey"] and cred.secret_access_key == seen["secretKey"]
    resources = {r for s in seen["policy"]["Statement"] for r in s["Resource"]}
    assert resources == {f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"}
    assert all(s["Effect"] == "Allow" for s in seen["policy"]["Statement"])
    assert not any(a.startswith(("s3:PutBucket", "s3:DeleteBucket", "admin:"))
                   for s in seen["policy"]["Statement"] for a in s["Action"])
    assert ADMIN_SECRET not in str(cred) and cred.secret_access_key not in repr(cred)
    httpserver.check_assertions()


@pytest.mark.parametrize("status,code,permanent", [
    (503, "XMinioServerNotInitialized", False), (500, "InternalError", False),
    (403, "AccessDenied", True), (400, "XMinioAdminInvalidArgument", True)])
def test_add_errors_map_to_driver_errors_and_clean_up(httpserver: HTTPServer, minio, status, code,
                                                      permanent):
    httpserver.expect_oneshot_request(ADD, method="PUT").respond_with_response(
        error(status, code, "the server said no"))
    deleted = []

    def delete(request):
        deleted.append(request.args["accessKey"])
        return error(404, "XMinioAdminNoSuchServiceAccount", "The specified service account is not found")

    httpserver.expect_request(DELETE, method="DELETE").respond_with_handler(delete)
    with pytest.raises(DriverError) as err:
        minio.issue_credential(BUCKET)
    assert err.value.permanent is permanent
    assert code in err.value.message or str(status) in err.value.message
    assert len(deleted) == 1 and deleted[0].startswith("TY")  # our chosen key, cleaned up


def test_revoke_deletes_and_accepts_an_already_gone_account(httpserver: HTTPServer, minio):
    cred = IssuedCredential(access_key_id="TYABC", secret_access_key="s", bucket=BUCKET, handle="TYABC")
    httpserver.expect_oneshot_request(DELETE, method="DELETE",
                                      query_string="accessKey=TYABC").respond_with_data("", status=204)
    minio.revoke_credential(cred)
    httpserver.expect_oneshot_request(DELETE, method="DELETE").respond_with_response(
        error(404, "XMinioAdminNoSuchServiceAccount", "The specified service account is not found"))
    minio.revoke_credential(cred)
    httpserver.expect_oneshot_request(DELETE, method="DELETE").respond_with_response(
        error(503, "XMinioServerNotInitialized", "Server not initialized, please try again"))
    with pytest.raises(DriverError) as err:
        minio.revoke_credential(cred)
    assert err.value.permanent is False
    httpserver.check_assertions()


def test_admin_endpoint_down_is_transient():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = MinioProvider(ProviderConfig(slug="minio", kind="minio",
                                           endpoint_url=f"http://127.0.0.1:{port}",
                                           access_key="trainyard", secret_key=ADMIN_SECRET))
    with pytest.raises(DriverError) as err:
        adapter.issue_credential(BUCKET)
    assert err.value.permanent is False and "cannot reach" in err.value.message
