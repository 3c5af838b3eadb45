// Package mapclient is the client of a user-defined map function or source
// transformer: a server of map.v1.Map (map, batch map or map stream, as its
// server-info file says) or of sourcetransformer.v1.SourceTransform, such as
// one built with numaflow-go's mapper, batchmapper, mapstreamer or
// sourcetransformer package or with sluice's pkg/sdk. The two services share
// this package's code: [New] makes the client of a map, [NewTransformer] the
// client of a source transformer, and both are a [Client], a [udf.Mapper] and
// a [udf.Forker].
//
// # Batches
//
// A batch goes over one stream, with every request in flight at once and the
// answers matched by id, so one slow message does not hold up the others.
// After a failure the batch's error is returned (the forwarder retries it)
// and the next batch reconnects, waiting for the server to be back. The
// map.v1 stream's messages are encoded by hand, straight from the runtime's
// own values.
//
// # Results
//
// A result tagged [DropTag] is dropped; an input with a result tagged
// [NackTag] or [RateLimitedTag] becomes one message with Nack set, handed
// back to its source.
package mapclient
