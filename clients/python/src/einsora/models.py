"""The API's objects (generated from its OpenAPI document): `from einsora.models import Workload`."""

from ._generated.models import *  # noqa: F401,F403
from ._generated.models import __all__  # noqa: F401
