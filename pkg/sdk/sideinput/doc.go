// Package sideinput serves a side input: a gRPC server of service
// sideinput.v1.SideInput on sideinput.sock, server-info file
// sideinput-server-info, that the runtime asks for the side input's value on
// the side input's schedule (spec.sideInputs[].trigger).
//
// # Serving
//
// A [Retriever] returns a [Message]: [BroadcastMessage] hands its value to
// every vertex that names the side input, [NoBroadcastMessage] leaves them
// the value they have.
//
//	sideinput.NewServer(sideinput.RetrieveFunc(func(ctx context.Context) sideinput.Message {
//		return sideinput.BroadcastMessage([]byte(time.Now().Format(time.RFC3339)))
//	})).Start(ctx)
//
// # Reading
//
// A UDF of a vertex that names the side input reads its value from the file
// [Path](name): in [Dir], which is $SLUICE_SIDE_INPUTS_DIR when set (vertex
// run sets it for the containers it starts with --side-inputs-dir) and
// /var/numaflow/side-inputs otherwise, as in Numaflow. The runtime replaces
// the file whole (a rename) at each new value, so reading it at any time
// gives one whole value; [Read] does.
package sideinput
