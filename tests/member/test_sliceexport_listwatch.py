"""The EndpointSlice informer over the emulated API (real HTTP): one watch over every slice
that names a Service, none of the slices mcsync manages, and a slice that becomes one of
ours leaves the informer as a DELETED."""

from __future__ import annotations

import copy
import threading

from member.informer import Informer
from member.kube.listwatch import EndpointSliceListWatch
from member.transform import transform_endpointslice
from tests.kube.fixtures import KubeCluster
from tests.kube.support import wait_for
from tests.member.informer_support import Recorder
from tests.member.test_sliceexport_agent import endpointslice

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def test_the_informer_sees_the_services_own_slices_only(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    state.create("endpointslices", "shop", endpointslice("web-a"))
    state.create(
        "endpointslices", "shop", endpointslice("web-mirror", labels={MANAGED_BY: "mcsync.io"})
    )
    orphan = endpointslice("loose")
    del orphan["metadata"]["labels"]["kubernetes.io/service-name"]
    state.create("endpointslices", "shop", orphan)

    recorder = Recorder()
    informer = Informer(
        name="endpointslices",
        list_watch=EndpointSliceListWatch(kube_cluster.api_client(), namespace=None),
        handler=recorder,
        transform=transform_endpointslice,
    )
    informer.start(stop)
    assert informer.wait_for_sync(30)
    assert informer.keys() == ["shop/web-a"]
    cached = informer.get("shop/web-a")
    assert cached is not None and "nodeName" not in cached["endpoints"][0]

    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    elsewhere = endpointslice("api-b", service="api")
    elsewhere["metadata"]["namespace"] = "other"
    state.create("endpointslices", "other", elsewhere)
    wait_for(
        lambda: informer.get("other/api-b") is not None, what="a new slice in another namespace"
    )
    taken = copy.deepcopy(state.get("endpointslices", "shop", "web-a"))
    assert taken is not None
    taken["metadata"]["labels"][MANAGED_BY] = "mcsync.io"
    state.update("endpointslices", "shop", taken)
    wait_for(lambda: informer.get("shop/web-a") is None, what="the slice leaving the selection")
    assert recorder.events[-1][:2] == ("DELETED", "shop/web-a")
