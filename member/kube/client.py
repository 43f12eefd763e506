"""Build a Kubernetes API client from settings, and find which ServiceExport version is served.

Two choices matter here:

* **No global state.** The official client keeps a process-wide default `Configuration`
  that `load_kube_config()` writes unless told otherwise. The agent (and its tests, which run
  several emulated clusters in one process) pass a fresh `Configuration` everywhere, so two
  clients never share credentials by accident.
* **One readable sentence on failure.** A wrong kubeconfig or an unreachable API server is
  the most common start-up problem; `KubeConfigError` says which, so `__main__` can print it
  and exit 2 instead of showing a stack trace.

The agent reads and writes raw JSON (`_preload_content=False`), not the client's generated
models: Services and custom objects then look alike, and fields newer than the client
(`trafficDistribution`) are not lost on the way.
"""

from __future__ import annotations

import json
import os
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from shared.constants import MCS_GROUP, MCS_SERVICEEXPORT_PLURAL, MCS_VERSIONS

__all__ = [
    "ApiException",
    "KubeConfigError",
    "discover_mcs_version",
    "discover_serviceexport_version",
    "load_api_client",
    "read_json",
    "request",
    "request_json",
]

# Connect and read timeouts of ordinary (non-watch) requests, seconds. A hung API server must
# turn into a retried error, not a worker blocked for ever.
REQUEST_TIMEOUT: tuple[float, float] = (10.0, 30.0)


class KubeConfigError(Exception):
    """Cluster access is not usable; the message says why in one sentence."""


def load_api_client(*, kubeconfig: str | None) -> k8s.ApiClient:
    """A client for `kubeconfig` if given, else in-cluster config, else `~/.kube/config`.

    Never touches the client library's global default configuration.
    """
    configuration = k8s.Configuration()
    if kubeconfig:
        _load_kubeconfig_file(kubeconfig, configuration)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            default = os.path.expanduser(k8s_config.KUBE_CONFIG_DEFAULT_LOCATION)
            if not os.path.exists(default):
                raise KubeConfigError(
                    "no Kubernetes configuration found: not running in a cluster and "
                    f"{default} does not exist; pass --kubeconfig"
                ) from None
            _load_kubeconfig_file(default, configuration)
    return k8s.ApiClient(configuration=configuration)


def _load_kubeconfig_file(path: str, configuration: k8s.Configuration) -> None:
    if not os.path.isfile(path):
        raise KubeConfigError(f"kubeconfig file {path} does not exist")
    try:
        k8s_config.load_kube_config(
            config_file=path, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise KubeConfigError(f"kubeconfig file {path} is not usable: {exc}") from None
    except Exception as exc:  # yaml errors and friends: still a config problem
        raise KubeConfigError(
            f"kubeconfig file {path} is not usable: {type(exc).__name__}: {exc}"
        ) from None


def request(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | tuple[float, float] | None = REQUEST_TIMEOUT,
) -> urllib3.BaseHTTPResponse:
    """One raw request through `api` (its host, TLS and credentials); the unread answer.

    Raises the client's `ApiException` (subclass by status) on a non-2xx answer. Bypasses the
    generated, pydantic-validated API methods: the agent speaks JSON dicts, and a typed body
    would drop fields the client does not know yet.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    # The body is JSON already (dicts, lists, strings, numbers, booleans): it is handed to
    # `call_api`, which encodes it, without `param_serialize`'s `sanitize_for_serialization`,
    # a recursive walk meant for the generated models that rebuilds every dict and list and
    # was a quarter of the client's CPU per write (docs/benchmarks.md §11).
    method, url, headers, _, post_params = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list(query.items()) if query else None,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    answer = api.call_api(
        method,
        url,
        header_params=headers,
        body=body,
        post_params=post_params,
        _request_timeout=timeout,
    )
    if not 200 <= answer.status <= 299:
        answer.read()
        raise ApiException.from_response(http_resp=answer, body=None, data=None)
    response: urllib3.BaseHTTPResponse = answer.response
    return response


def request_json(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    content_type: str = "application/json",
) -> Any:
    """`request()`, answering the decoded JSON body."""
    return read_json(request(api, method, path, query=query, body=body, content_type=content_type))


def read_json(response: Any) -> Any:
    """Decode the body of an unread (`_preload_content=False`) answer."""
    data = response.data
    return json.loads(data) if data else None


def discover_serviceexport_version(api: k8s.ApiClient) -> str:
    """ "v1beta1" when the cluster serves ServiceExports there, else "v1alpha1"
    (docs/reference.md#export-path).

    Asks API discovery (`/apis/multicluster.x-k8s.io/<version>`) whether the version lists
    the `serviceexports` resource. Raises `KubeConfigError` when no version serves it (the
    CRD is not installed) or the API server cannot be reached.
    """
    return discover_mcs_version(api, MCS_SERVICEEXPORT_PLURAL, "ServiceExport")


def discover_mcs_version(api: k8s.ApiClient, plural: str, kind: str) -> str:
    """The preferred MCS API version (`MCS_VERSIONS` order) serving `plural`; raises as
    `discover_serviceexport_version`, naming `kind`."""
    host = api.configuration.host
    try:
        groups = request_json(api, "GET", "/apis")
    except ApiException as exc:
        raise KubeConfigError(
            f"the Kubernetes API server at {host} refused API discovery: {_api_reason(exc)}"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeConfigError(
            f"the Kubernetes API server at {host} is unreachable: {_short(exc)}"
        ) from None
    served: list[str] = []
    for group in (groups or {}).get("groups") or []:
        if group.get("name") == MCS_GROUP:
            served = [str(v.get("version")) for v in group.get("versions") or []]
    for version in MCS_VERSIONS:
        if version not in served:
            continue
        try:
            resources = request_json(api, "GET", f"/apis/{MCS_GROUP}/{version}")
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise KubeConfigError(
                f"the Kubernetes API server at {host} refused discovery of "
                f"{MCS_GROUP}/{version}: {_api_reason(exc)}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeConfigError(
                f"the Kubernetes API server at {host} is unreachable: {_short(exc)}"
            ) from None
        names = {r.get("name") for r in (resources or {}).get("resources") or []}
        if plural in names:
            return version
    raise KubeConfigError(
        f"the cluster at {host} does not serve {kind}s ({MCS_GROUP} "
        f"{' or '.join(MCS_VERSIONS)}); install the {kind} CRD (the member chart ships it)"
    )


def _api_reason(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
        message = body.get("message")
        if message:
            return f"{exc.status} {message}"
    except (ValueError, AttributeError):
        pass
    return f"{exc.status} {exc.reason}"


def _short(exc: BaseException) -> str:
    # urllib3's MaxRetryError repeats the whole URL and a nested repr; keep the cause only.
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc)
