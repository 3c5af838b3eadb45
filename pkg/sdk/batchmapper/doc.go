// Package batchmapper serves a batch map user-defined function (UDF) over
// Numaflow's gRPC protocol: the function gets a whole batch of messages at
// once (to call an external service once per batch, say) and answers each
// of them.
//
//	func main() {
//		err := batchmapper.NewServer(batchmapper.BatchMapperFunc(enrich)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket batchmap.sock and, once it listens,
// writes the server-info file mapper-server-info with MAP_MODE batch-map (and,
// as numaflow-go does for batch map, no minimum Numaflow version). It serves
// map.v1.Map: each MapFn stream starts with a handshake; then the runtime
// sends batches, each a run of requests followed by a request with
// status{eot: true}. The server answers a batch with one response per
// request id, in the order of the requests, then a response with
// status{eot: true}; the stream carries batch after batch. A BatchMapper
// that answers an id twice has its messages merged; one that leaves an id
// unanswered, or answers an unknown one, fails the stream with Internal.
//
// # Nacks and user metadata
//
// As in package mapper, the answer to a datum may be a nack,
// NewBatchResponse(d.ID(), MessageToNack(opts)), which has the runtime
// deliver the message again later; and messages carry user metadata, read
// with Datum.UserMetadata and set with Message.WithUserMetadata (the
// runtime does not pass it from input to output by itself). Every result
// carries a metadata, empty when the message has none; numaflow-go's batch
// map sends none at all, which Numaflow treats the same.
//
// # Socket directory and stopping
//
// As in package mapper: WithSocketDir, else SLUICE_UDS_DIR (set by `vertex
// run --spawn`), else /var/run/numaflow; Start returns after a graceful stop
// on context end, SIGTERM or SIGINT, and a panic becomes the gRPC error
// Internal "UDF_EXECUTION_ERROR(<container>): <panic value>" (<container>
// is NUMAFLOW_UD_CONTAINER_TYPE, or "batchmap") and stops the server.
package batchmapper
