"""Control plane for SRv6/uSID multi-plane Clos fabrics: topology, path plans, P4Runtime, failover."""

import os as _os

# gRPC core logs a failed TLS handshake at INFO on stderr unless told otherwise; fabricctl says what
# went wrong in one `error:` line instead (GRPC_VERBOSITY=debug shows gRPC's own logs again). It
# takes effect only if set before grpc is first imported, hence here.
_os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
