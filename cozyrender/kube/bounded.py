"""One API request bounded by the time its caller has left.

Rule: lightkube's Client fixes one timeout for every call; a caller working
to a deadline (an admission decision, a lease renewal) gives each request
the seconds it has left instead (`call`), and a request that runs out
raises `Overdue` (it may have been stored all the same: the caller decides
what that means). Without a timeout, the client's own applies. Requests go
through lightkube's own request building and answer decoding, so errors are
its ApiError as from `client.get` or `client.replace`."""

from __future__ import annotations


class Overdue(Exception):
    """A request that did not finish in the time it was given."""


def call(client, method: str, timeout: float | None, **request):
    """`method` ("get", "post", "put", ...) of lightkube `client`, with
    `request` as lightkube's prepare_request takes it (res, obj, name,
    namespace, params), waiting at most `timeout` seconds."""
    import httpx2

    if hasattr(client, "bounded_call"):  # a wrapper that watches its calls (controllers.manager.Contact)
        return client.bounded_call(method, timeout, **request)
    inner = client._client
    prepared = inner.prepare_request(method, **request)
    if timeout is not None:
        prepared.timeout = httpx2.Timeout(max(timeout, 0.001))
    try:
        response = inner.send(inner.build_adapter_request(prepared))
    except httpx2.TimeoutException:
        raise Overdue(f"the API server did not answer in the {timeout or 0:.2g} s left") from None
    return inner.handle_response(method, response, prepared)


__all__ = ["Overdue", "call"]
