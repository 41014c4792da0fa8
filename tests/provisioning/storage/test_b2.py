"""The B2 adapter against recorded exchanges of B2's native API v3 (pytest-httpserver).

Documented pairs (https://www.backblaze.com/apidocs):
  GET  /b2api/v3/b2_authorize_account  (Basic keyId:applicationKey) → 200 {accountId,
       authorizationToken, apiInfo: {storageApi: {apiUrl, s3ApiUrl, …}}}
  POST /b2api/v3/b2_list_buckets   {accountId, bucketName}           → 200 {buckets: [...]}
  POST /b2api/v3/b2_create_bucket  {accountId, bucketName, bucketType, lifecycleRules,
       defaultServerSideEncryption}                                  → 200 bucket
  POST /b2api/v3/b2_update_bucket, b2_create_key {accountId, capabilities, keyName, bucketId},
       b2_delete_key {applicationKeyId}, b2_list_file_versions, b2_delete_bucket
  errors → {"status": N, "code": "...", "message": "..."}: 400 duplicate_bucket_name,
       401 unauthorized / expired_auth_token, 503 service_unavailable, 429 too_many_requests
"""

import base64
import json

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from provisioning.drivers.base import DriverError
from provisioning.storage.b2 import B2Provider
from provisioning.storage.base import IssuedCredential, LifecyclePolicy, ProviderConfig

KEY_ID, APP_KEY, ACCOUNT = "0014a2b3c4d5e6f0000000001", "K001app-key-secret", "4a2b3c4d5e6f"
BUCKET, BUCKET_ID = "trainyard-o-1234abcd", "e73ede9c9c8412db49f60715"
OURS = {"buckets": [{"bucketId": BUCKET_ID, "bucketName": BUCKET}]}
V3 = "/b2api/v3/"


def b2_error(status: int, code: str, message: str) -> Response:
    return Response(json.dumps({"status": status, "code": code, "message": message}), status=status,
                    content_type="application/json")


@pytest.fixture
def b2(httpserver: HTTPServer):
    base = httpserver.url_for("").rstrip("/")
    tokens = iter(["4_001_token_a", "4_001_token_b", "4_001_token_c"])

    def authorize(request):
        assert request.headers["Authorization"] == "Basic " + base64.b64encode(
            f"{KEY_ID}:{APP_KEY}".encode()).decode()
        return Response(json.dumps({
            "accountId": ACCOUNT, "authorizationToken": next(tokens),
            "apiInfo": {"storageApi": {
                "apiUrl": base, "s3ApiUrl": "https://s3.us-west-004.backblazeb2.com",
                "downloadUrl": base, "recommendedPartSize": 100000000}},
            "applicationKeyExpirationTimestamp": None}), content_type="application/json")

    httpserver.expect_request(V3 + "b2_authorize_account", method="GET").respond_with_handler(authorize)
    return B2Provider(ProviderConfig(slug="b2", kind="b2", access_key=KEY_ID, secret_key=APP_KEY,
                                     options={"api_url": base}))


def _json(httpserver, path, payload, status=200):
    httpserver.expect_oneshot_request(path, method="POST").respond_with_response(
        Response(json.dumps(payload), status=status, content_type="application/json"))


def test_new_bucket_is_private_with_lifecycle_and_encryption(httpserver: HTTPServer, b2):
    _json(httpserver, "/b2api/v3/b2_list_buckets", {"buckets": []})
    created = {}

    def create(request):
        assert request.headers["Authorization"] == "4_001_token_a"
        created.update(request.json)
        return Response(json.dumps({"accountId": ACCOUNT, "bucketId": BUCKET_ID, "bucketName": BUCKET,
                                    "bucketType": "allPrivate"}), content_type="application/json")

    httpserver.expect_oneshot_request(V3 + "b2_create_bucket", method="POST").respond_with_handler(create)
    report = b2.ensure_bucket(BUCKET, lifecycle=LifecyclePolicy(noncurrent_days=21))
    assert report.created and "lifecycle-keep-versions" in report.skipped
    assert created["bucketType"] == "allPrivate" and created["accountId"] == ACCOUNT
    assert created["lifecycleRules"] == [{"fileNamePrefix": "", "daysFromUploadingToHiding": None,
                                          "daysFromHidingToDeleting": 21}]
    assert created["defaultServerSideEncryption"] == {"mode": "SSE-B2", "algorithm": "AES256"}
    httpserver.check_assertions()


def test_our_existing_bucket_is_adopted_and_its_settings_reapplied(httpserver: HTTPServer, b2):
    _json(httpserver, V3 + "b2_list_buckets", OURS)
    _json(httpserver, "/b2api/v3/b2_update_bucket", {"bucketId": BUCKET_ID, "bucketName": BUCKET})
    assert b2.ensure_bucket(BUCKET, lifecycle=LifecyclePolicy()).created is False
    httpserver.check_assertions()


def test_a_name_taken_by_another_account_is_permanent(httpserver: HTTPServer, b2):
    _json(httpserver, "/b2api/v3/b2_list_buckets", {"buckets": []})
    httpserver.expect_oneshot_request("/b2api/v3/b2_create_bucket", method="POST").respond_with_response(
        b2_error(400, "duplicate_bucket_name", "Bucket name is already in use."))
    with pytest.raises(DriverError) as err:
        b2.ensure_bucket(BUCKET)
    assert err.value.permanent and "taken by another B2 account" in err.value.message


def test_key_is_restricted_to_the_bucket(httpserver: HTTPServer, b2):
    _json(httpserver, V3 + "b2_list_buckets", OURS)
    asked = {}

    def create_key(request):
        asked.update(request.json)
        return Response(json.dumps({
            "accountId": ACCOUNT, "applicationKey": "K004newsecret", "applicationKeyId": "004newkeyid",
            "bucketId": BUCKET_ID, "capabilities": asked["capabilities"], "keyName": asked["keyName"],
            "namePrefix": None, "expirationTimestamp": None, "options": ["s3"]}),
            content_type="application/json")

    httpserver.expect_oneshot_request(V3 + "b2_create_key", method="POST").respond_with_handler(
        create_key)
    cred = b2.issue_credential(BUCKET)
    assert (cred.access_key_id, cred.secret_access_key) == ("004newkeyid", "K004newsecret")
    assert asked["bucketId"] == BUCKET_ID
    forbidden = {"writeKeys", "deleteBuckets", "writeBuckets", "listAllBucketNames"}
    assert not forbidden & set(asked["capabilities"])
    assert {"readFiles", "writeFiles", "listFiles", "deleteFiles"} <= set(asked["capabilities"])


def test_expired_token_reauthorises_once(httpserver: HTTPServer, b2):
    httpserver.expect_oneshot_request("/b2api/v3/b2_list_buckets", method="POST").respond_with_response(
        b2_error(401, "expired_auth_token", "Authorization token has expired"))
    _json(httpserver, "/b2api/v3/b2_list_buckets", {"buckets": []})
    assert b2.find_bucket(BUCKET) is None


@pytest.mark.parametrize("status,code,permanent", [
    (503, "service_unavailable", False), (429, "too_many_requests", False), (500, "internal_error", False),
    (401, "unauthorized", True), (400, "bad_request", True)])
def test_errors_map_to_driver_errors(httpserver: HTTPServer, b2, status, code, permanent):
    httpserver.expect_request("/b2api/v3/b2_delete_key", method="POST").respond_with_response(
        b2_error(status, code, "the server said no"))
    with pytest.raises(DriverError) as err:
        b2.revoke_credential(IssuedCredential(access_key_id="004k", secret_access_key="s", bucket=BUCKET))
    assert err.value.permanent is permanent
    assert APP_KEY not in err.value.message


def test_revoke_of_a_key_already_gone_is_fine(httpserver: HTTPServer, b2):
    httpserver.expect_oneshot_request("/b2api/v3/b2_delete_key", method="POST").respond_with_response(
        b2_error(400, "bad_request", "Key not found: 004k"))
    b2.revoke_credential(IssuedCredential(access_key_id="004k", secret_access_key="s", bucket=BUCKET))


def test_non_empty_bucket_is_not_deleted_unless_forced(httpserver: HTTPServer, b2):
    _json(httpserver, V3 + "b2_list_buckets", OURS)
    _json(httpserver, "/b2api/v3/b2_list_file_versions",
          {"files": [{"fileName": "ckpt/a.pt", "fileId": "4_z1"}], "nextFileName": None})
    with pytest.raises(DriverError) as err:
        b2.delete_bucket(BUCKET)
    assert err.value.permanent and "not empty" in err.value.message


def test_endpoint_down_is_transient():
    adapter = B2Provider(ProviderConfig(slug="b2", kind="b2", access_key=KEY_ID, secret_key=APP_KEY,
                                        options={"api_url": "http://127.0.0.1:9"}))
    with pytest.raises(DriverError) as err:
        adapter.find_bucket(BUCKET)
    assert err.value.permanent is False
