"""Provider faults become DriverError: transient for what may pass (endpoint down, 500, 503,
SlowDown, throttling), permanent with a reason for what will not (bucket owned by someone else,
admin key refused); nothing half-created survives a failed key issue.

The S3/IAM endpoint answers come from pytest-httpserver with the documented S3 and IAM error
bodies (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html)."""

import json
import socket
import uuid

import pytest
from pytest_httpserver import HTTPServer

from provisioning.drivers.base import DriverError
from provisioning.storage.base import LifecyclePolicy, ProviderConfig
from provisioning.storage.iam import IamProvider
from provisioning.storage.models import Credential
from provisioning.storage.services import storage_setup

BUCKET = "trainyard-o-faults"


def s3_error(code: str, message: str) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>")


def iam_error(code: str, message: str) -> str:
    return (f'<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error>'
            f"<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestId></ErrorResponse>")


def provider(endpoint: str, iam_endpoint: str | None = None) -> IamProvider:
    return IamProvider(ProviderConfig(slug="aws-s3", kind="aws", endpoint_url=endpoint,
                                      region="us-east-1", access_key="AKIAADMIN", secret_key="admin-secret",
                                      options={"iam_endpoint_url": iam_endpoint or endpoint}))


def ensure(p):
    return p.ensure_bucket(BUCKET, lifecycle=LifecyclePolicy())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoint_down_is_transient():
    with pytest.raises(DriverError) as err:
        ensure(provider(f"http://127.0.0.1:{_closed_port()}"))
    assert type(err.value) is DriverError and err.value.permanent is False
    assert "cannot reach" in err.value.message


@pytest.mark.parametrize("status,code", [(500, "InternalError"), (503, "SlowDown"),
                                         (503, "ServiceUnavailable")])
def test_server_errors_and_slowdown_on_create_are_transient(httpserver: HTTPServer, status, code):
    httpserver.expect_request(f"/{BUCKET}", method="HEAD").respond_with_data("", status=404)
    httpserver.expect_request(f"/{BUCKET}", method="PUT").respond_with_data(
        s3_error(code, "Please reduce your request rate."), status=status,
        content_type="application/xml")
    with pytest.raises(DriverError) as err:
        ensure(provider(httpserver.url_for("")))
    assert err.value.permanent is False and "will retry" in err.value.message


def test_503_without_body_on_head_is_transient(httpserver: HTTPServer):
    httpserver.expect_request(f"/{BUCKET}", method="HEAD").respond_with_data("", status=503)
    with pytest.raises(DriverError) as err:
        ensure(provider(httpserver.url_for("")))
    assert err.value.permanent is False


def test_bucket_owned_by_another_account_is_permanent(httpserver: HTTPServer):
    httpserver.expect_request(f"/{BUCKET}", method="HEAD").respond_with_data("", status=404)
    httpserver.expect_request(f"/{BUCKET}", method="PUT").respond_with_data(
        s3_error("BucketAlreadyExists", "The requested bucket name is not available."), status=409,
        content_type="application/xml")
    with pytest.raises(DriverError) as err:
        ensure(provider(httpserver.url_for("")))
    assert err.value.permanent and "taken by another account" in err.value.message


def test_bucket_visible_but_forbidden_is_someone_elses(httpserver: HTTPServer):
    httpserver.expect_request(f"/{BUCKET}", method="HEAD").respond_with_data("", status=403)
    with pytest.raises(DriverError) as err:
        ensure(provider(httpserver.url_for("")))
    assert err.value.permanent and "taken by another account" in err.value.message


def test_admin_access_denied_is_permanent_with_a_reason(httpserver: HTTPServer):
    httpserver.expect_request(f"/{BUCKET}", method="HEAD").respond_with_data("", status=404)
    httpserver.expect_request(f"/{BUCKET}", method="PUT").respond_with_data(
        s3_error("AccessDenied", "Access Denied"), status=403, content_type="application/xml")
    with pytest.raises(DriverError) as err:
        ensure(provider(httpserver.url_for("")))
    assert err.value.permanent and "refused the admin key" in err.value.message


def test_iam_throttling_is_transient_and_leaves_no_user(httpserver: HTTPServer):
    calls = []

    def iam(request):
        from werkzeug import Response

        action = request.form.get("Action")
        calls.append(action)
        if action == "CreateUser":
            return Response("<CreateUserResponse><CreateUserResult><User><UserName>u</UserName>"
                            "<Path>/trainyard/</Path><UserId>AIDA1</UserId><Arn>arn:aws:iam::1:user/u</Arn>"
                            "<CreateDate>2026-01-01T00:00:00Z</CreateDate></User></CreateUserResult>"
                            "</CreateUserResponse>", content_type="text/xml")
        if action == "PutUserPolicy":
            return Response(iam_error("Throttling", "Rate exceeded"), status=400, content_type="text/xml")
        if action == "ListAccessKeys":
            return Response("<ListAccessKeysResponse><ListAccessKeysResult><AccessKeyMetadata/>"
                            "<IsTruncated>false</IsTruncated></ListAccessKeysResult></ListAccessKeysResponse>",
                            content_type="text/xml")
        if action == "DeleteUserPolicy":
            return Response(iam_error("NoSuchEntity", "no policy"), status=404, content_type="text/xml")
        return Response(f"<{action}Response><ResponseMetadata><RequestId>1</RequestId>"
                        f"</ResponseMetadata></{action}Response>", content_type="text/xml")

    httpserver.expect_request("/", method="POST").respond_with_handler(iam)
    with pytest.raises(DriverError) as err:
        provider("http://127.0.0.1:9", iam_endpoint=httpserver.url_for("/")).issue_credential(BUCKET)
    assert err.value.permanent is False
    assert calls[-1] == "DeleteUser"  # the half-created user was removed before giving up


def test_key_issue_failing_half_way_leaves_nothing_behind(db, order, storage_provider, admin_iam,
                                                          settings):
    # A real admin in moto whose policy denies creating access keys: user + policy get created,
    # the key is refused, and both must be gone afterwards.
    name = f"half-admin-{uuid.uuid4().hex[:6]}"
    admin_iam.create_user(UserName=name)
    admin_iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"},
            {"Effect": "Deny", "Action": "iam:CreateAccessKey", "Resource": "*"}]}))
    key = admin_iam.create_access_key(UserName=name)["AccessKey"]
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": {
        **settings.STORAGE_PROVIDERS["minio"], "access_key": key["AccessKeyId"],
        "secret_key": key["SecretAccessKey"]}}
    with pytest.raises(DriverError) as err:
        storage_setup(order=order)
    assert err.value.permanent and "refused the admin key" in err.value.message
    prefix = f"{settings.STORAGE_BUCKET_PREFIX}-"
    assert [u for u in admin_iam.list_users(PathPrefix="/trainyard/")["Users"]
            if u["UserName"].startswith(prefix)] == []
    assert not Credential.objects.filter(bucket__order=order).exists()
    assert key["SecretAccessKey"] not in err.value.message
