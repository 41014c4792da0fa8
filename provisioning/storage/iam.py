"""AWS S3 and Wasabi: buckets through the S3 API, customer keys as IAM users with an inline
bucket policy and one access key (both providers speak the IAM API).

Options (``ProviderConfig.options``): ``iam_endpoint_url`` (default: the kind's IAM endpoint),
``canary_bucket`` (default: ``<STORAGE_BUCKET_PREFIX>-canary``)."""

from __future__ import annotations

import json
import secrets

from botocore.exceptions import BotoCoreError, ClientError

from provisioning.drivers.base import DriverError
from provisioning.storage.base import (
    IssuedCredential,
    LogFn,
    ProviderConfig,
    _no_log,
)
from provisioning.storage.errors import error_code, from_sdk_error, translated
from provisioning.storage.policy import bucket_policy
from provisioning.storage.s3ops import S3BucketAdmin, S3Buckets, make_client

IAM_ENDPOINTS = {"aws": "", "wasabi": "https://iam.wasabisys.com"}
S3_ENDPOINTS = {"aws": "", "wasabi": "https://s3.{region}.wasabisys.com"}
USER_PATH = "/trainyard/"
POLICY_NAME = "trainyard-bucket-access"


class IamProvider(S3BucketAdmin):
    creates_buckets = True

    def __init__(self, config: ProviderConfig) -> None:
        if not (config.access_key and config.secret_key):
            raise DriverError(f"storage provider {config.slug!r} has no admin credentials: set "
                              f"STORAGE_{_env_slug(config.slug)}_ACCESS_KEY and _SECRET_KEY "
                              f"(docs/storage.md)", permanent=True)
        self.config = config
        region = config.region or "us-east-1"
        self.endpoint_url = config.endpoint_url or S3_ENDPOINTS.get(config.kind, "").format(region=region)
        self.iam_endpoint_url = config.options.get("iam_endpoint_url") or IAM_ENDPOINTS.get(config.kind, "")
        self._s3 = self._client("s3")
        self._iam = self._client("iam", endpoint_url=self.iam_endpoint_url)
        self.buckets = S3Buckets(self._s3, region=config.region)

    def _client(self, service: str, *, endpoint_url: str | None = None, credential=None):
        c = self.config
        return make_client(
            service, endpoint_url=self.endpoint_url if endpoint_url is None else endpoint_url,
            region=c.region, addressing_style=c.addressing_style,
            access_key=credential.access_key_id if credential else c.access_key,
            secret_key=credential.secret_access_key if credential else c.secret_key)

    def s3_client(self, credential: IssuedCredential | None = None):
        return self._s3 if credential is None else self._client("s3", credential=credential)

    def issue_credential(self, bucket: str, *, read_only: bool = False,
                         log: LogFn = _no_log) -> IssuedCredential:
        user = f"{bucket[:52]}-{secrets.token_hex(4)}"
        created_user = False
        try:
            self._iam.create_user(UserName=user, Path=USER_PATH,
                                  Tags=[{"Key": "trainyard-bucket", "Value": bucket}])
            created_user = True
            self._iam.put_user_policy(UserName=user, PolicyName=POLICY_NAME,
                                      PolicyDocument=json.dumps(bucket_policy(bucket, read_only=read_only)))
            key = self._iam.create_access_key(UserName=user)["AccessKey"]
        except (BotoCoreError, ClientError) as exc:
            error = from_sdk_error(exc, f"issue a key for {bucket}")
            if created_user:
                self._delete_user(user, log)
            raise error from None
        log(f"IAM user {user} created with key {key['AccessKeyId']} scoped to {bucket}"
            + (" (list and read only)" if read_only else ""))
        return IssuedCredential(access_key_id=key["AccessKeyId"],
                                secret_access_key=key["SecretAccessKey"], bucket=bucket, handle=user)

    def revoke_credential(self, credential: IssuedCredential, *, log: LogFn = _no_log) -> None:
        user = credential.handle
        if not user:
            raise DriverError(f"cannot revoke {credential.access_key_id}: its IAM user is unknown",
                              permanent=True)
        with translated(f"revoke key {credential.access_key_id}"):
            self._delete_user(user, log, strict=True)
        log(f"key {credential.access_key_id} revoked (IAM user {user} deleted)")

    def _delete_user(self, user: str, log: LogFn, *, strict: bool = False) -> None:
        """Access keys, inline policy, then the user. strict: SDK errors propagate (except
        'already gone'); otherwise best effort during cleanup of a failed issue."""
        steps = [
            lambda: [self._iam.delete_access_key(UserName=user, AccessKeyId=k["AccessKeyId"])
                     for k in self._iam.list_access_keys(UserName=user)["AccessKeyMetadata"]],
            lambda: self._iam.delete_user_policy(UserName=user, PolicyName=POLICY_NAME),
            lambda: self._iam.delete_user(UserName=user),
        ]
        for step in steps:
            try:
                step()
            except ClientError as exc:
                if error_code(exc) == "NoSuchEntity":
                    continue
                if strict:
                    raise
                log(f"cleanup of IAM user {user} incomplete: {error_code(exc)}")
                return
            except BotoCoreError:
                if strict:
                    raise
                log(f"cleanup of IAM user {user} incomplete: endpoint unreachable")
                return
        log(f"IAM user {user} removed")


def _env_slug(slug: str) -> str:
    return {"aws-s3": "AWS"}.get(slug, slug.upper().replace("-", "_"))
