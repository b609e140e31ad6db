"""Name and format rules of the Kubernetes API (RFC 1123 names, label syntax, DRA names).

Each check returns an error detail (a string) or None. Results are memoised: inventories
repeat the same attribute names and drivers on every device, so each distinct string is
checked once per process.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kubedra.api.semver import is_valid_semver
from kubedra.api.validation import limits

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

LABEL_DETAIL = (
    "must be a lowercase RFC 1123 label: at most 63 lower case alphanumeric characters "
    "or '-', starting and ending with an alphanumeric character (e.g. 'gpu-0')"
)
SUBDOMAIN_DETAIL = (
    "must be a lowercase RFC 1123 subdomain: at most 253 characters, dot-separated labels of "
    "lower case alphanumerics or '-', each starting and ending with an alphanumeric "
    "(e.g. 'gpu.example.com')"
)
C_IDENTIFIER_DETAIL = (
    "must be a C identifier: letters, digits and '_', not starting with a digit (e.g. 'memory')"
)


@lru_cache(maxsize=65536)
def dns_label(value: str) -> str | None:
    """RFC 1123 label: device, request, counter and namespace names."""
    if len(value) > 63 or not _LABEL.fullmatch(value):
        return LABEL_DETAIL
    return None


@lru_cache(maxsize=65536)
def dns_subdomain(value: str, max_length: int = 253) -> str | None:
    """RFC 1123 subdomain: object names, driver names, class names."""
    if len(value) > max_length:
        return f"must be no more than {max_length} characters"
    if not all(_LABEL.fullmatch(part) for part in value.split(".")):
        return SUBDOMAIN_DETAIL
    return None


def driver_name(value: str) -> str | None:
    """A driver name as a driver should be named: a lower-case subdomain of at most 63
    characters (CSI driver rules). The node driver holds its own name to it."""
    return dns_subdomain(value, limits.DRIVER_NAME_MAX_LENGTH)


def api_driver_name(value: str) -> str | None:
    """A driver name as the API server accepts it: `driver_name` in any case. Upstream's
    rule checks the lower-cased name (a ResourceSlice with upper case in its driver is
    stored, with a warning)."""
    return driver_name(value.lower())


@lru_cache(maxsize=65536)
def pool_name(value: str) -> str | None:
    """Pool names: up to 253 characters, `/`-separated parts that are each a subdomain."""
    if len(value) > limits.POOL_NAME_MAX_LENGTH:
        return f"must be no more than {limits.POOL_NAME_MAX_LENGTH} characters"
    for part in value.split("/"):
        detail = dns_subdomain(part)
        if detail:
            return f"each '/'-separated part {detail}"
    return None


@lru_cache(maxsize=65536)
def qualified_name(value: str) -> str | None:
    """Attribute and capacity names (map keys): `identifier` or `domain/identifier`, the
    domain checked as a driver name (any case). Like upstream, a name with more than one
    `/` is not checked at all (see `many_slashes`)."""
    parts = value.split("/")
    if len(parts) > 2:
        return None
    if len(parts) == 2:
        if not parts[0]:
            return "the domain must not be empty"
        detail = api_driver_name(parts[0])
        if detail:
            return f"the domain {detail.replace('253', str(limits.DEVICE_MAX_DOMAIN_LENGTH))}"
    return _identifier(parts[-1])


@lru_cache(maxsize=65536)
def fully_qualified_name(value: str) -> str | None:
    """matchAttribute / distinctAttribute names: `domain/identifier`, the domain a lower-case
    subdomain of at most 63 characters (upstream's declarative `k8s-resource-fully-qualified-
    name` format, which, unlike the map-key rule, is case-sensitive)."""
    if "/" not in value:
        return "a fully qualified name must be a domain and a name separated by a slash"
    parts = value.split("/")
    if len(parts) > 2:
        return None
    if not parts[0]:
        return "the domain must not be empty"
    detail = dns_subdomain(parts[0], limits.DEVICE_MAX_DOMAIN_LENGTH)
    if detail:
        return f"the domain {detail.replace('253', str(limits.DEVICE_MAX_DOMAIN_LENGTH))}"
    return _identifier(parts[1])


def _identifier(ident: str) -> str | None:
    if not ident:
        return "the name must not be empty"
    if len(ident) > limits.DEVICE_MAX_ID_LENGTH:
        return f"the name must be no more than {limits.DEVICE_MAX_ID_LENGTH} characters"
    if not _C_IDENTIFIER.fullmatch(ident):
        return f"the name {C_IDENTIFIER_DETAIL}"
    return None


def many_slashes(value: str) -> str | None:
    """A warning for a qualified name with more than one `/`: upstream accepts it today (its
    validation documents the gap as a TODO) and may refuse it in a later release."""
    if value.count("/") > 1:
        return (
            "has more than one '/': the API server accepts it today, but it is no valid "
            "qualified name (`domain/name`) and a later release may refuse it"
        )
    return None


@lru_cache(maxsize=65536)
def label_key(value: str) -> str | None:
    """Label, taint and toleration keys: `[prefix/]name`, prefix a subdomain, name <= 63."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        detail = dns_subdomain(prefix)
        if detail:
            return f"prefix part {detail}"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return (
            "name part must be at most 63 alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


@lru_cache(maxsize=65536)
def label_value(value: str) -> str | None:
    """Label and taint values: empty, or at most 63 characters of the label-name alphabet."""
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        return (
            "a valid label value must be empty or at most 63 alphanumeric characters, '-', '_' "
            "or '.', starting and ending with an alphanumeric character"
        )
    return None


@lru_cache(maxsize=4096)
def version_value(value: str) -> str | None:
    """Version attributes: strict semantic versions (semver 2.0.0)."""
    if len(value) > limits.ATTRIBUTE_MAX_VALUE_LENGTH:
        return f"must be no more than {limits.ATTRIBUTE_MAX_VALUE_LENGTH} characters"
    return None if is_valid_semver(value) else "must be a semantic version (semver 2.0.0)"


def extended_resource_name(value: str) -> str | None:
    """Extended resources (`example.com/gpu`), by upstream's declarative rule: a domain-
    prefixed name, nothing under `kubernetes.io/`, not `requests.`-prefixed, and a valid
    label key once quota's `requests.` is put in front."""
    if "/" not in value:
        return "a name must be a domain-prefixed path, such as 'example.com/my-prop'"
    if "kubernetes.io/" in value:
        return 'must not have "kubernetes.io/" domain'
    if value.startswith("requests."):
        return 'must not have "requests." prefix'
    return label_key(f"requests.{value}")


def path_segment_name(value: str) -> str | None:
    """A name that must be usable as one segment of a URL path (kinds and names a
    reference may carry): not `.` or `..`, without `/` or `%`."""
    if value in (".", ".."):
        return f"may not be '{value}'"
    for bad in ("/", "%"):
        if bad in value:
            return f"may not contain '{bad}'"
    return None


def share_id(value: str) -> str | None:
    """shareID: a UUID in normalized lower-case RFC 4122 form."""
    return None if _UUID.fullmatch(value) else "must be a lower-case RFC 4122 UUID"


def object_uid(value: str) -> str | None:
    """metadata.uid as the API server generates it: a random UUID in lower-case RFC 4122 text.

    Clients cannot choose UIDs, so anything else (a path, an empty string) did not come from
    the API server. Not memoised: callers pass untrusted strings of any length."""
    if len(value) != 36 or not _UUID.fullmatch(value):
        return "must be a lower-case RFC 4122 UUID, as the API server generates for metadata.uid"
    return None
