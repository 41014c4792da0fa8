"""Turns SDK and HTTP errors into DriverError: transient (retry may help) or permanent (a reason
staff can act on). No botocore, urllib3 or requests exception leaves an adapter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ParamValidationError

from provisioning.drivers.base import DriverError


class UnsafeEndpointError(BotoCoreError):
    """A customer's endpoint resolved to an address the portal does not connect to (raised by a
    guarded client, ``s3ops.make_client(guarded=True)``; not retried)."""

    fmt = "{reason}"

TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests",
    "TooManyRequestsException", "ServiceUnavailable", "InternalError", "RequestTimeout",
    "RequestTimeTooSkewed", "OperationAborted", "503", "500", "502", "504",
})
# The admin key itself is refused: retrying cannot help until someone fixes the settings.
ADMIN_REFUSED_CODES = frozenset({
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId",
    "AuthFailure", "UnrecognizedClientException", "InvalidToken", "ExpiredToken", "403",
})


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or "")


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def is_transient_status(status: int) -> bool:
    return status >= 500 or status == 429


def from_client_error(exc: ClientError, what: str) -> DriverError:
    code, status = error_code(exc), http_status(exc)
    message = exc.response.get("Error", {}).get("Message") or code or f"HTTP {status}"
    if code in TRANSIENT_CODES or is_transient_status(status):
        return DriverError(f"{what}: the provider is busy or failing ({code or status}: {message}); "
                           f"will retry", permanent=False)
    if code in ADMIN_REFUSED_CODES:
        return DriverError(f"{what}: the provider refused the admin key ({code}: {message}). Check the "
                           f"provider's admin credentials and their permissions (docs/storage.md).",
                           permanent=True)
    return DriverError(f"{what}: {code or status}: {message}", permanent=True)


def from_sdk_error(exc: Exception, what: str) -> DriverError:
    if isinstance(exc, ClientError):
        return from_client_error(exc, what)
    if isinstance(exc, NoCredentialsError):
        return DriverError(f"{what}: no credentials configured for this provider", permanent=True)
    if isinstance(exc, ParamValidationError):
        return DriverError(f"{what}: invalid request: {exc}", permanent=True)
    if isinstance(exc, UnsafeEndpointError):
        return DriverError(f"{what}: {exc} (public addresses only, or OUTBOUND_ALLOWED_NETWORKS)",
                           permanent=True)
    # Endpoint down, connection reset, timeouts, truncated responses: may pass.
    return DriverError(f"{what}: cannot reach the storage endpoint ({type(exc).__name__}: {exc}); "
                       f"will retry", permanent=False)


@contextmanager
def translated(what: str) -> Iterator[None]:
    """``with translated("create bucket x"):`` raises DriverError for any SDK error inside."""
    try:
        yield
    except DriverError:
        raise
    except (BotoCoreError, ClientError) as exc:
        raise from_sdk_error(exc, what) from None
