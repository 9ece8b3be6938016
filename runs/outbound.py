"""Where model requests may go and which credentials may go with them
(docs/configuration.md, "Model servers: keys and addresses").

Two operator settings decide it, never a user:

* ``MODEL_KEYS`` (``REASONAUDIT_MODEL_KEYS``): the environment variables a judge or subject
  model may name as its API key, each with the hosts it may be sent to. A name not on the list is
  refused at save time without looking at the environment (so the answer does not tell whether
  the variable exists); a variable the application itself reads (``SECRET_KEY``,
  ``DATABASE_URL``, ``CELERY_BROKER_URL``, ...) is never sent, listed or not. A blank name sends
  no key at all: there is no implicit ``OPENAI_API_KEY``.
* ``MODEL_NETWORKS`` (``REASONAUDIT_MODEL_NETWORKS``): the non-public networks (loopback, private,
  link-local, ...) model servers may live in. Public addresses are always allowed. A host name is
  resolved and *every* address it resolves to must pass; the check runs again on each request
  (``GuardedTransport``) and the connection goes to the address that was checked, so a name that
  resolves to a public address at save time and to 127.0.0.1 later (DNS rebinding) is refused.

Messages name the policy, never whether a port answered.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import httpx2
from django.conf import settings

from reasonaudit.env import ANY_HOST, is_app_variable
from reasonlib.refusals import Invalid

# Query parameters that carry credentials (Azure's api-key, signed URLs, tokens): refused in a
# base_url and removed wherever a URL is shown or logged.
_SECRET_PARAM = re.compile(r"key|token|secret|passw|auth|sig|credential|session", re.IGNORECASE)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class OutboundRefused(Invalid):
    """A model request or configuration the operator's policy does not allow; ``field`` names the
    configuration field at fault (``base_url`` or ``api_key_env``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def model_keys() -> Mapping[str, Sequence[str]]:
    return getattr(settings, "MODEL_KEYS", {})


def model_networks() -> Sequence[Network]:
    return getattr(settings, "MODEL_NETWORKS", ())


# --------------------------------------------------------------------------
# URLs


def redact_url(url: str) -> str:
    """The URL without user:password@ and without query parameters that look like credentials
    (shown, logged and stored in run configurations in this form)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an invalid URL)"
    if ":" in host:
        host = f"[{host}]"
    query = [(k, v if not _SECRET_PARAM.search(k) else "REDACTED") for k, v in parse_qsl(parts.query,
                                                                                           keep_blank_values=True)]
    return urlunsplit((parts.scheme, host + port, parts.path, urlencode(query), ""))


def url_credentials(url: str) -> str | None:
    """What in ``url`` is a credential (a reason), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "a user name or password before the host"
    for key, _value in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAM.search(key):
            return f"the query parameter {key!r}"
    return None


# --------------------------------------------------------------------------
# Addresses


def _address(value: str) -> Address | None:
    try:
        address = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address


def address_allowed(address: Address, networks: Iterable[Network] | None = None) -> bool:
    """Public (globally routable) addresses always; others (loopback, private, link-local,
    unspecified, reserved, multicast) only inside an allowed network."""
    networks = model_networks() if networks is None else networks
    if address.is_global and not address.is_multicast:
        return True
    return any(address.version == net.version and address in net for net in networks)


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (an address literal: itself); [] when it does not resolve."""
    literal = _address(host.strip("[]"))
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    found: list[Address] = []
    for info in infos:
        address = _address(str(info[4][0]))
        if address is not None and address not in found:
            found.append(address)
    return found


def _policy_error(host: str) -> str:
    return (f"the host {host} is in a network the operator's address policy does not allow for model servers "
            f"(REASONAUDIT_MODEL_NETWORKS)")


def check_host(host: str, port: int, *, must_resolve: bool) -> list[Address]:
    """The addresses of ``host`` when every one is allowed; OutboundRefused otherwise. A name that does
    not resolve is refused only when ``must_resolve`` (at request time; at save time a server may not be up yet)."""
    addresses = resolve(host, port)
    if not addresses and must_resolve:
        raise OutboundRefused("base_url", f"the host name {host} does not resolve")
    if any(not address_allowed(a) for a in addresses):
        raise OutboundRefused("base_url", _policy_error(host))
    return addresses


def _port(parts) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def check_endpoint(base_url: str, api_key_env: str, *, must_resolve: bool = False) -> None:
    """Save-time (and request-time) check of a model server configuration: no credentials in the
    URL, an address the policy allows, and a key name the operator lists for this host.
    Raises OutboundRefused naming the field."""
    if not base_url:
        return
    reason = url_credentials(base_url)
    if reason is not None:
        raise OutboundRefused("base_url", f"the URL holds {reason}; name the API key in api_key_env instead "
                                          "(REASONAUDIT_MODEL_KEYS)")
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        port = _port(parts)
    except ValueError:
        raise OutboundRefused("base_url", "enter an http:// or https:// URL") from None
    if api_key_env:
        check_key(api_key_env, host)
    if host:
        check_host(host, port, must_resolve=must_resolve)


def check_key(api_key_env: str, host: str) -> None:
    allowed = model_keys().get(api_key_env)
    if allowed is None or is_app_variable(api_key_env):
        # Never looks at os.environ: the answer is the same whether the variable exists or not.
        raise OutboundRefused("api_key_env", f"{api_key_env} is not a key name the operator allows "
                                             "(REASONAUDIT_MODEL_KEYS); leave it blank for a server without a key")
    if ANY_HOST not in allowed and host.lower() not in allowed:
        raise OutboundRefused("api_key_env", f"the operator allows the key {api_key_env} only for "
                                             f"{', '.join(allowed)}, not for {host}")


def api_key_for(base_url: str, api_key_env: str) -> str:
    """The key to send to ``base_url``: "" without a name; the variable's value when the operator allows
    this name for this host (OutboundRefused otherwise, or when the allowed variable is unset)."""
    if not api_key_env:
        return ""
    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        host = ""
    check_key(api_key_env, host)
    key = os.environ.get(api_key_env, "")
    if not key:
        raise OutboundRefused("api_key_env", f"the API key {api_key_env} is not set on the worker")
    return key


# --------------------------------------------------------------------------
# Request time


def _pin(request) -> None:
    """Check the request's host against the policy and point it at the address that was checked (the
    Host header, already set, and the TLS server name stay the host name)."""
    host = request.url.host
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    addresses = check_host(host, port, must_resolve=True)
    if _address(host.strip("[]")) is None:
        request.url = request.url.copy_with(host=str(addresses[0]))
        if request.url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}


class GuardedTransport(httpx.HTTPTransport):
    """An httpx transport that checks every request (each redirect too) against the address policy
    just before connecting and connects to the address it checked, so a name that changes its address
    between the check and the connection (DNS rebinding) gets nowhere."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _pin(request)
        return super().handle_request(request)


class GuardedTransport2(httpx2.HTTPTransport):
    """GuardedTransport for the ``openai`` client, which is built on httpx2."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            _pin(request)
        except OutboundRefused as exc:
            # As a connection error the openai client hands it on (runs.transport finds the cause).
            raise httpx2.ConnectError(str(exc), request=request) from exc
        return super().handle_request(request)


def guarded_client(timeout: float, **kwargs) -> httpx.Client:
    return httpx.Client(transport=GuardedTransport(), timeout=timeout, **kwargs)


# --------------------------------------------------------------------------
# What servers say

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
SERVER_MESSAGE_CHARS = 300


def server_message(text: str, limit: int = SERVER_MESSAGE_CHARS) -> str:
    """A model server's error text as it may appear in a job error: control characters removed,
    URLs redacted, at most ``limit`` characters."""
    text = _CONTROL.sub(" ", str(text))
    text = re.sub(r"https?://[^\s\"'<>]{1,2000}", lambda m: redact_url(m.group(0)), text)
    return text if len(text) <= limit else text[:limit] + "..."
