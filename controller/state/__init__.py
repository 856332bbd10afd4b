"""Where the fabric's record lives: the failure-state file and its lock, the store interface with its file and etcd backends, leadership."""
