"""Where the fabric's record lives: the store interface, the state-file and etcd backends, leadership."""
