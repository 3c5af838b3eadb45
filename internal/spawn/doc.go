// Package spawn runs the user-defined containers of a vertex as child
// processes of the vertex, for local runs and benchmarks: `vertex run --spawn`
// and `vertex bench --spawn` use it, and so can any Go program that runs a
// vertex with package vertex or pipeline.
//
// # Starting
//
// [Start] starts, for each vertex of a config that runs in this process, the
// command of each of its user-defined containers (spec.source.udsource,
// spec.source.transformer, spec.udf, spec.sink.udsink and
// spec.sink.fallback.udsink; command and args, with env), in the vertex's
// socket directory: the directory given for a MonoVertex or for the one vertex
// of a pipeline that runs alone, or the directories
// [github.com/sluiceflow/sluice/pkg/pipeline.SocketDirs] gives. Each child
// finds the directory in $SLUICE_UDS_DIR ([EnvUDSDir]), its role in
// $NUMAFLOW_UD_CONTAINER_TYPE, the replica in $NUMAFLOW_REPLICA and the
// vertex in $NUMAFLOW_MONO_VERTEX_NAME, beside the vertex's own environment.
//
// Before a container starts, the server-info files of the servers its role
// runs are removed from the directory, and so are their sockets that no
// server listens on: the vertex then only reads a server-info file the new
// server wrote. A socket a server still listens on is left, with a warning.
//
// # Restarts and stopping
//
// A container that exits is started again, as Kubernetes restarts a
// container of a pod: after 100ms, doubling up to 5s while it keeps exiting
// within 10s of its start, its files cleared again first. [Group.Stop] sends
// every child SIGTERM, and SIGKILL 5s later, and waits for them. On Linux the
// kernel kills the children when the vertex dies, even by SIGKILL; on every
// Unix each child has a process group of its own, so that Ctrl-C in a terminal
// reaches the vertex alone, which stops its children once it has drained.
//
// # Socket directory
//
// [Dir] picks the directory for the sockets of the containers a process
// spawns: /var/run/numaflow, which servers that know no other directory
// (numaflow-go's) use, while no other sluice process holds its lock, else a
// new temporary directory.
//
// # Errors
//
// A container without a command is [ErrNoCommand]; a socket directory that
// cannot be created is a [*DirError].
package spawn
