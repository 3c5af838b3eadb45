// Package proto holds the protobuf definitions of the gRPC protocol spoken
// between sluice and user-defined functions built with Numaflow's Go SDK
// (numaflow-go v0.12), and of KEDA's external scaler, which `vertex scaler`
// serves, together with the Go code generated from them.
//
// Layout (proto package → Go package):
//
//	common/                 common                shared message metadata and nack options
//	map/v1/                 map.v1                → mapv1 (unary, batch and streaming map)
//	accumulator/v1/         accumulator.v1        → accumulatorv1 (accumulators, a window per key set)
//	reduce/v1/              reduce.v1             → reducev1 (reduce and reduce stream, aligned windows)
//	sessionreduce/v1/       sessionreduce.v1      → sessionreducev1 (session reduce, per-key session windows)
//	sink/v1/                sink.v1               → sinkv1 (sink, fallback sink, on-success sink)
//	source/v1/              source.v1             → sourcev1
//	sourcetransformer/v1/   sourcetransformer.v1  → sourcetransformerv1
//	externalscaler/         externalscaler        KEDA's externalscaler.ExternalScaler
//
// Proto package, service, rpc and message names, field numbers and types are
// the wire contract and must not change. The *.pb.go files are generated and
// checked in; after editing a .proto file run scripts/gen-proto.sh.
package proto
