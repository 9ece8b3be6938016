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
  (``GuardedTransport2``) and the connection goes to the address that was checked, so a name that
  resolves to a public address at save time and to 127.0.0.1 later (DNS rebinding) is refused.
  An IPv6 address that embeds an IPv4 address (NAT64, 6to4, ...) is judged as that address.

The same transport sends nothing but the request, HTTP's own headers and the allowed key, within a
total deadline and with a capped response (docs/configuration.md, "What leaves the server").
Messages name the policy, never whether a port answered.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx2
from django.conf import settings

from reasonaudit.env import ANY_HOST, is_app_variable
from reasonlib.refusals import Invalid
from runs import deadline

# Query parameters that carry credentials (Azure's api-key, signed URLs, tokens, ?pwd=, ?bearer=): refused
# in a base_url and removed wherever a URL is shown or logged.
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|auth|bearer|sig|credential|session|jwt|cookie", re.IGNORECASE)
# A path segment that is a credential: a known key format (OpenAI sk-, Hugging Face hf_, GitHub, Slack,
# GitLab, AWS, a JWT), or a long run of mixed-case letters and digits (base64 keys). Lower-case hex ids
# (a gateway's account id) and words are not keys.
_TOKEN_SEGMENT = re.compile(
    r"(?:sk|pk|rk|sess)-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_\w{8,}"
    r"|xox[abprs]-[A-Za-z0-9-]{8,}|glpat-[A-Za-z0-9_-]{8,}|(?:AKIA|ASIA)[A-Z0-9]{12,}|eyJ[A-Za-z0-9_-]{8,}.*"
    r"|(?=[A-Za-z0-9_+/=-]*[a-z])(?=[A-Za-z0-9_+/=-]*[A-Z])(?=[A-Za-z0-9_+/=-]*[0-9])[A-Za-z0-9_+/=-]{32,}")
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


def _path_secret(segment: str) -> str | None:
    """Why a path segment is a credential (a reason), or None: a path parameter (``;api_key=...``,
    ``;jsessionid=``) or a token (``_TOKEN_SEGMENT``), percent-encoded or not."""
    text = unquote(segment)
    if ";" in text or "=" in text:
        return f"a parameter in the path ({text.split(';', 1)[-1].split('=', 1)[0][:40]!r})"
    if _TOKEN_SEGMENT.fullmatch(text):
        return "what looks like a key or token in the path"
    return None


def redact_url(url: str) -> str:
    """The URL without user:password@, without query parameters that look like credentials and with
    path segments that look like credentials replaced (shown, logged and stored in run configurations
    in this form)."""
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
    path = "/".join("REDACTED" if _path_secret(segment) else segment for segment in parts.path.split("/"))
    return urlunsplit((parts.scheme, host + port, path, urlencode(query), ""))


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
    for segment in parts.path.split("/"):
        reason = _path_secret(segment)
        if reason is not None:
            return reason
    return None


def shown_url(url: str) -> str:
    """A stored base_url as the REST API shows it to members: as it is, or redacted when it holds what is
    now refused as a credential (a row saved before the rule; the pages redact every URL they show)."""
    return redact_url(url) if url and url_credentials(url) is not None else url


# --------------------------------------------------------------------------
# Addresses


# IPv6 forms that carry an IPv4 address the packet ends up at: NAT64 (RFC 6052, the well-known prefix and
# the local-use one, whose operator picks where the IPv4 address sits), 6to4 and Teredo (ipaddress
# finds those two), IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d) addresses.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


def _rfc6052(value: int, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address inside a NAT64 address of a ``prefix``-bit prefix (bits 64-71 are never used)."""
    bits = [(value >> (127 - i)) & 1 for i in range(128)]
    where = [i for i in range(prefix, 128) if not 64 <= i < 72][:32]
    return ipaddress.IPv4Address(int("".join(str(bits[i]) for i in where), 2))


def embedded_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address may stand for ([] for one that embeds none)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    value = int(address)
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if value >> 32 == 0 and value > 1:  # ::a.b.c.d (:: and ::1 are themselves)
        found.append(ipaddress.IPv4Address(value))
    if value >> 32 == 0xFFFF0000:  # ::ffff:0:a.b.c.d
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if address in _NAT64_LOCAL:
        found.extend(_rfc6052(value, prefix) for prefix in (48, 56, 64, 96))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


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
    unspecified, reserved, multicast) only inside an allowed network.
    An IPv6 address that embeds IPv4 addresses (NAT64, 6to4, Teredo, ::a.b.c.d) is judged as those:
    each must be allowed, unless the IPv6 address itself is in an allowed network."""
    networks = model_networks() if networks is None else networks
    if any(address.version == net.version and address in net for net in networks):
        return True
    embedded = embedded_ipv4(address)
    if embedded:
        return all(address_allowed(v4, networks) for v4 in embedded)
    return address.is_global and not address.is_multicast


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


# What a model server is sent besides the request body: what HTTP needs and the application's own key,
# nothing else. The openai client adds OPENAI_ORG_ID, OPENAI_PROJECT_ID and every line of
# OPENAI_CUSTOM_HEADERS from the worker's environment (an Authorization line among them) to whatever
# base_url a study owner chose, and its X-Stainless-* headers describe the worker; the transport drops
# every header not named here, so what an environment variable holds never leaves, whatever the client does.
SENT_HEADERS = frozenset({"host", "accept", "content-type", "content-length", "transfer-encoding", "connection"})
USER_AGENT = "ReasonAudit"


def _only_our_headers(request, api_key: str) -> None:
    for name in list(request.headers.keys()):
        if name.lower() not in SENT_HEADERS:
            del request.headers[name]
    request.headers["User-Agent"] = USER_AGENT
    # Uncompressed: the size cap counts what is parsed, so a compressed body cannot inflate past it.
    request.headers["Accept-Encoding"] = "identity"
    if api_key:
        request.headers["Authorization"] = f"Bearer {api_key}"


def response_max_bytes() -> int:
    return int(getattr(settings, "MODEL_RESPONSE_MAX_BYTES", 16 * 1024 * 1024))


class GuardedTransport2(httpx2.HTTPTransport):
    """The transport of every request to a model server (the ``openai`` client's and the save-time
    check's):

    * every request (each redirect too) is checked against the address policy just before connecting
      and connects to the address it checked, so a name that changes its address between the check and
      the connection (DNS rebinding) gets nowhere;
    * only SENT_HEADERS and the application's own key (``api_key``; none when empty) are sent;
    * connect + headers + body take at most ``seconds`` in all (runs.deadline: the caller's deadline
      when it set one, else one per request), and a body over ``max_bytes`` is cut (ResponseTooLarge);
    * nothing from the environment: no proxy, no .netrc, no CA bundle variables (``trust_env=False``)."""

    def __init__(self, *, api_key: str = "", seconds: float = 120.0, max_bytes: int | None = None) -> None:
        super().__init__(trust_env=False)
        # httpcore's pool takes its socket backend at construction only; this one bounds every socket
        # operation by what is left of the request's deadline.
        self._pool._network_backend = deadline.DeadlineBackend()
        self.api_key = api_key
        self.seconds = seconds
        self.max_bytes = max_bytes  # None: the setting, read on each request

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            _pin(request)
        except OutboundRefused as exc:
            # As a connection error the openai client hands it on (runs.transport finds the cause).
            raise httpx2.ConnectError(str(exc), request=request) from exc
        _only_our_headers(request, self.api_key)
        when = deadline.current()
        own = when is None
        if own:
            when = deadline.start(self.seconds)
        try:
            response = super().handle_request(request)
        except BaseException:
            if own:
                deadline.clear()
            raise
        # What is capped is what is parsed: a body the server compressed anyway is not inflated.
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
        cap = response_max_bytes() if self.max_bytes is None else self.max_bytes
        response.stream = deadline.CappedStream(response.stream, when, cap, clear=own)
        return response


def guarded_client(timeout: float, **kwargs) -> httpx2.Client:
    """An HTTP client for a model server outside the openai client (the save-time check): the same
    transport, ``timeout`` the total deadline of each request."""
    return httpx2.Client(transport=GuardedTransport2(seconds=timeout), timeout=timeout, trust_env=False, **kwargs)


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
