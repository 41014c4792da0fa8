"""Backblaze B2 through its native API (plain HTTP, ``requests``): buckets with lifecycle and
default encryption via b2_create_bucket / b2_update_bucket, customer keys via b2_create_key
restricted to one bucket, b2_delete_key to revoke. Customers use the S3-compatible endpoint.

B2 keeps every version of a file (versioning is always on); its lifecycle rules count days, so
"keep the newest N versions" and "abort unfinished uploads" are reported as skipped.

Options: ``api_url`` (default https://api.backblazeb2.com), ``canary_bucket``.
API reference: https://www.backblaze.com/apidocs (v3)."""

from __future__ import annotations

from dataclasses import dataclass

import requests

from provisioning.drivers.base import DriverError
from provisioning.storage.base import (
    BucketReport,
    IssuedCredential,
    LifecyclePolicy,
    LogFn,
    ProviderConfig,
    _no_log,
)
from provisioning.storage.s3ops import make_client

API_URL = "https://api.backblazeb2.com"
KEY_CAPABILITIES = ["listBuckets", "listFiles", "readFiles", "writeFiles", "deleteFiles"]
READ_ONLY_CAPABILITIES = ["listBuckets", "listFiles", "readFiles"]
TIMEOUT = (5, 60)


class B2ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


@dataclass
class _Session:
    account_id: str
    token: str
    api_url: str
    s3_api_url: str


class B2Provider:
    creates_buckets = True

    def __init__(self, config: ProviderConfig) -> None:
        if not (config.access_key and config.secret_key):
            raise DriverError(f"storage provider {config.slug!r} has no admin credentials: set "
                              f"STORAGE_B2_KEY_ID and STORAGE_B2_APPLICATION_KEY (docs/storage.md)",
                              permanent=True)
        self.config = config
        self.api_url = (config.options.get("api_url") or API_URL).rstrip("/")
        self.http = requests.Session()
        self._session: _Session | None = None

    # --- native API plumbing ----------------------------------------------------------------
    def _authorize(self) -> _Session:
        answer = self._send("GET", f"{self.api_url}/b2api/v3/b2_authorize_account",
                            auth=(self.config.access_key, self.config.secret_key))
        storage = answer["apiInfo"]["storageApi"]
        self._session = _Session(account_id=answer["accountId"], token=answer["authorizationToken"],
                                 api_url=storage["apiUrl"], s3_api_url=storage.get("s3ApiUrl", ""))
        return self._session

    def _call(self, operation: str, payload: dict) -> dict:
        """POST one operation; re-authorises once when the token has expired."""
        for attempt in (1, 2):
            session = self._session or self._authorize()
            try:
                return self._send("POST", f"{session.api_url}/b2api/v3/{operation}", json=payload,
                                  headers={"Authorization": session.token})
            except B2ApiError as exc:
                if exc.status == 401 and exc.code in {"expired_auth_token", "bad_auth_token"} \
                        and attempt == 1:
                    self._session = None
                    continue
                raise
        raise AssertionError("unreachable")

    def _send(self, method: str, url: str, **kwargs) -> dict:
        response = self.http.request(method, url, timeout=TIMEOUT, **kwargs)
        if response.status_code == 200:
            return response.json()
        try:
            body = response.json()
        except ValueError:
            body = {}
        raise B2ApiError(response.status_code, str(body.get("code", "")),
                         str(body.get("message", response.reason))[:300])

    def _do(self, what: str, operation: str, payload: dict) -> dict:
        try:
            return self._call(operation, payload)
        except B2ApiError as exc:
            raise b2_error(exc, what) from None
        except (requests.RequestException, ValueError, KeyError) as exc:
            raise b2_error(exc, what) from None

    @property
    def account_id(self) -> str:
        if self._session is None:
            try:
                self._authorize()
            except (B2ApiError, requests.RequestException, ValueError, KeyError) as exc:
                raise b2_error(exc, "authorise with B2") from None
        return self._session.account_id

    # --- BucketProvider -------------------------------------------------------------------
    def s3_client(self, credential: IssuedCredential | None = None):
        c = self.config
        endpoint = c.endpoint_url or (self._session.s3_api_url if self._session else "")
        return make_client("s3", endpoint_url=endpoint, region=c.region,
                           addressing_style=c.addressing_style,
                           access_key=credential.access_key_id if credential else c.access_key,
                           secret_key=credential.secret_access_key if credential else c.secret_key)

    def canary_bucket(self) -> str | None:
        return self.config.options.get("canary_bucket") or None

    def find_bucket(self, name: str) -> dict | None:
        answer = self._do(f"look up bucket {name}", "b2_list_buckets",
                          {"accountId": self.account_id, "bucketName": name})
        return next((b for b in answer.get("buckets", []) if b.get("bucketName") == name), None)

    def ensure_bucket(self, name: str, *, versioning: bool = True,
                      lifecycle: LifecyclePolicy | None = None, encryption: bool = True,
                      log: LogFn = _no_log) -> BucketReport:
        settings: dict = {}
        skipped: list[str] = []
        if lifecycle is not None:
            settings["lifecycleRules"] = [{"fileNamePrefix": "", "daysFromUploadingToHiding": None,
                                           "daysFromHidingToDeleting": lifecycle.noncurrent_days}]
            skipped += ["lifecycle-keep-versions", "lifecycle-abort-multipart"]
        if encryption:
            settings["defaultServerSideEncryption"] = {"mode": "SSE-B2", "algorithm": "AES256"}
        existing = self.find_bucket(name)
        if existing is None:
            try:
                self._call("b2_create_bucket", {"accountId": self.account_id, "bucketName": name,
                                                "bucketType": "allPrivate", **settings})
            except B2ApiError as exc:
                if exc.code == "duplicate_bucket_name":
                    raise DriverError(f"bucket name {name} is taken by another B2 account: choose "
                                      f"another STORAGE_BUCKET_PREFIX", permanent=True) from None
                raise b2_error(exc, f"create bucket {name}") from None
            except (requests.RequestException, ValueError, KeyError) as exc:
                raise b2_error(exc, f"create bucket {name}") from None
            log(f"B2 bucket {name} created (private, versions kept, lifecycle and SSE-B2 set)")
            return BucketReport(name=name, created=True, skipped=tuple(skipped))
        self._do(f"update bucket {name}", "b2_update_bucket",
                 {"accountId": self.account_id, "bucketId": existing["bucketId"],
                  "bucketType": "allPrivate", **settings})
        log(f"B2 bucket {name} exists and is ours: settings re-applied")
        return BucketReport(name=name, created=False, skipped=tuple(skipped))

    def issue_credential(self, bucket: str, *, read_only: bool = False,
                         log: LogFn = _no_log) -> IssuedCredential:
        found = self.find_bucket(bucket)
        if found is None:
            raise DriverError(f"cannot issue a key: B2 bucket {bucket} does not exist", permanent=True)
        answer = self._do(f"issue a key for {bucket}", "b2_create_key", {
            "accountId": self.account_id, "keyName": bucket[:100], "bucketId": found["bucketId"],
            "capabilities": READ_ONLY_CAPABILITIES if read_only else KEY_CAPABILITIES})
        log(f"B2 application key {answer['applicationKeyId']} created, restricted to {bucket}")
        return IssuedCredential(access_key_id=answer["applicationKeyId"],
                                secret_access_key=answer["applicationKey"], bucket=bucket,
                                handle=answer["applicationKeyId"])

    def revoke_credential(self, credential: IssuedCredential, *, log: LogFn = _no_log) -> None:
        try:
            self._call("b2_delete_key", {"applicationKeyId": credential.access_key_id})
        except B2ApiError as exc:
            if not (exc.status == 404 or exc.code == "not_found"
                    or (exc.status == 400 and "not found" in exc.message.lower())):
                raise b2_error(exc, f"revoke key {credential.access_key_id}") from None
        except (requests.RequestException, ValueError) as exc:
            raise b2_error(exc, f"revoke key {credential.access_key_id}") from None
        log(f"B2 application key {credential.access_key_id} deleted")

    def delete_bucket(self, name: str, *, force: bool = False, log: LogFn = _no_log) -> bool:
        found = self.find_bucket(name)
        if found is None:
            log(f"B2 bucket {name} is already gone")
            return False
        bucket_id = found["bucketId"]
        files = self._do(f"list {name}", "b2_list_file_versions",
                         {"bucketId": bucket_id, "maxFileCount": 1000})
        if files.get("files"):
            if not force:
                raise DriverError(f"bucket {name} is not empty: refusing to delete it", permanent=True)
            while files.get("files"):
                for f in files["files"]:
                    self._do(f"delete {f['fileName']}", "b2_delete_file_version",
                             {"fileName": f["fileName"], "fileId": f["fileId"]})
                files = self._do(f"list {name}", "b2_list_file_versions",
                                 {"bucketId": bucket_id, "maxFileCount": 1000})
        self._do(f"delete bucket {name}", "b2_delete_bucket",
                 {"accountId": self.account_id, "bucketId": bucket_id})
        log(f"B2 bucket {name} deleted")
        return True


def b2_error(exc: Exception, what: str) -> DriverError:
    if isinstance(exc, B2ApiError):
        if exc.status >= 500 or exc.status == 429 or exc.code in {"service_unavailable",
                                                                  "too_many_requests"}:
            return DriverError(f"{what}: B2 is busy or failing (HTTP {exc.status} {exc.code}); "
                               f"will retry", permanent=False)
        if exc.status in (401, 403):
            return DriverError(f"{what}: B2 refused the admin key ({exc.code}: {exc.message}). Check "
                               f"STORAGE_B2_KEY_ID/_APPLICATION_KEY and the key's capabilities.",
                               permanent=True)
        return DriverError(f"{what}: B2 answered HTTP {exc.status} {exc.code}: {exc.message}",
                           permanent=True)
    if isinstance(exc, requests.RequestException):
        return DriverError(f"{what}: cannot reach B2 ({type(exc).__name__}); will retry",
                           permanent=False)
    return DriverError(f"{what}: unreadable answer from B2 ({type(exc).__name__}: {exc})",
                       permanent=False)
