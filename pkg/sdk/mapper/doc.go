// Package mapper serves a unary map user-defined function (UDF) over
// Numaflow's gRPC protocol, so that sluice, or Numaflow, can call it.
//
// A map function turns one message into zero, one or many messages. Write
// it as a Mapper (or a MapperFunc) and serve it:
//
//	func main() {
//		err := mapper.NewServer(mapper.MapperFunc(double)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket map.sock and, once it listens,
// writes the server-info file mapper-server-info with MAP_MODE unary-map. It
// serves map.v1.Map: each MapFn stream starts with a handshake, then any
// number of requests may be in flight; each is mapped concurrently with the
// others (see Mapper) and answered, as soon as it is done, with a response
// that carries its id.
//
// # Nacks and user metadata
//
// Instead of answering a message, Map can negatively acknowledge (nack) it:
// Messages{MessageToNack(opts)} asks the runtime to deliver the message
// again later, as opts say (after opts.Delay milliseconds, say; nil opts
// leave it to the runtime's defaults). On the wire, the result carries the
// tag NackTag ("U+005C__NACK__") and, with opts, nack_options.
//
// Map can also fail a message, to be called with it again:
// Messages{MessageToFail()}, a result tagged FailTag ("U+005C__FAIL__"),
// has the runtime retry it as the vertex's udf.retryStrategy says (and,
// with onFailure drop, drop it once the retries are spent).
//
// Messages also carry user metadata: groups of keys with values of bytes
// that travel with a message from vertex to vertex. Datum.UserMetadata is
// the input's (a copy to change at will); Message.WithUserMetadata sets an
// output's. The runtime does not pass the input's user metadata on by
// itself, so a function that keeps it passes it on explicitly:
//
//	md := d.UserMetadata()
//	md.AddKV("trace", "mapped-by", []byte("double"))
//	return Messages{NewMessage(out).WithUserMetadata(md)}
//
// Every result carries a metadata, empty when the message has no user
// metadata, as numaflow-go's results do.
//
// # Socket directory
//
// The socket and the server-info file go to WithSocketDir's directory, else
// to the directory named by the environment variable SLUICE_UDS_DIR (which
// `vertex run --spawn` sets for the UDF processes it starts), else to
// /var/run/numaflow.
//
// # Stopping
//
// Start returns when its context ends or the process gets SIGTERM or SIGINT,
// after a graceful stop: open streams get WithShutdownTimeout to finish. A
// panic in Map fails its stream with the gRPC error Internal
// "UDF_EXECUTION_ERROR(<container>): <panic value>" and stops the server;
// Start then returns an error, and the process should exit so that it is
// restarted. <container> is the value of NUMAFLOW_UD_CONTAINER_TYPE, or
// "map".
package mapper
