"""Einsora's Python SDK: a client of the JSON API (/v1) of an Einsora installation.

    import einsora

    client = einsora.Client()  # EINSORA_SERVER and EINSORA_TOKEN, as the CLI reads them
    nb = client.workloads.create(kind="notebook", name="nb", gpu_class="cpu-1c-2g",
                                 image="jupyterlab")
    client.workloads.wait_for(nb.id, "running")

The models and `client.api` (every operation) are generated from the API's OpenAPI document
(clients/python/generate.py); the rest is written by hand. Standard library only.
"""

from ._generated import API_VERSION, VERSION
from . import models
from ._generated.models import (
    AccessGrant,
    ApiToken,
    CreateTokenResponse,
    LogLine,
    UsageRecord,
    Workload,
    WorkloadEvent,
)
from .client import Client, Endpoints, Tokens, Usage, Workloads
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    BadGateway,
    Conflict,
    EinsoraError,
    FailedPrecondition,
    Forbidden,
    GatewayTimeout,
    InternalError,
    InvalidArgument,
    InvalidRequest,
    InvalidTransition,
    LastOwner,
    MethodNotAllowed,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    RateLimited,
    StillOwns,
    TooLarge,
    Unauthenticated,
    Unavailable,
    WaitTimeout,
    WorkloadFailed,
)

__version__ = VERSION

__all__ = [
    "API_VERSION",
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AccessGrant",
    "ApiToken",
    "BadGateway",
    "Client",
    "Conflict",
    "CreateTokenResponse",
    "EinsoraError",
    "Endpoints",
    "FailedPrecondition",
    "Forbidden",
    "GatewayTimeout",
    "InternalError",
    "InvalidArgument",
    "InvalidRequest",
    "InvalidTransition",
    "LastOwner",
    "LogLine",
    "MethodNotAllowed",
    "NotFound",
    "PermissionDenied",
    "QuotaExceeded",
    "RateLimited",
    "StillOwns",
    "Tokens",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "Usage",
    "UsageRecord",
    "WaitTimeout",
    "Workload",
    "WorkloadEvent",
    "WorkloadFailed",
    "Workloads",
    "__version__",
    "models",
]
