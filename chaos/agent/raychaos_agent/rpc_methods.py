"""The RPC methods this node's Ray names in ``RAY_testing_rpc_failure``: one JSON list.

    python -m raychaos_agent.rpc_methods

Read from the release's own service descriptors (``ray.core.generated.*_pb2``), named the way
Ray's C++ clients name a call: ``Service.grpc_client.Method`` for the raylet's and the core
worker's services (``grpc_client.h``), and the proto package as a C++ namespace before GCS
services (``ray::rpc::ActorInfoGcsService.grpc_client.CreateActor``, the GCS client's
``rpc_client.h``). Ray ignores any other name without a word, so the host refuses it.
"""

from __future__ import annotations

import json
import sys

#: Services whose callers are C++ clients, by generated module: (module, services or None for
#: all of them, prefixed with the proto package).
CLIENTS = (
    ("node_manager_pb2", ("NodeManagerService",), False),
    ("core_worker_pb2", ("CoreWorkerService",), False),
    ("gcs_service_pb2", None, True),
    ("autoscaler_pb2", ("AutoscalerStateService",), True),
)


def main() -> int:
    import importlib

    names: list[str] = []
    for module_name, services, prefixed in CLIENTS:
        module = importlib.import_module(f"ray.core.generated.{module_name}")
        namespace = module.DESCRIPTOR.package.replace(".", "::") + "::"
        for service in module.DESCRIPTOR.services_by_name.values():
            if services is not None and service.name not in services:
                continue
            head = (namespace if prefixed else "") + service.name
            names.extend(f"{head}.grpc_client.{m.name}" for m in service.methods)
    print(json.dumps(sorted(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
