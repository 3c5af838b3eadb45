// Package protocodec is a gRPC codec for protocol buffers that puts on the
// wire exactly what gRPC's default codec does, with fewer allocations for
// the small messages of the user-defined function protocols.
//
// # Use
//
// Both ends of a connection choose it for themselves; the other end sees the
// standard encoding and needs nothing:
//
//	grpc.NewClient(target, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(protocodec.Codec{})))
//	grpc.NewServer(grpc.ForceServerCodecV2(protocodec.Codec{}))
//
// # Hand-written encodings
//
// Besides generated messages, Codec takes values that encode themselves
// ([Marshaler]) or decode themselves ([Unmarshaler]): a hot path can then
// send and receive a protocol's messages straight from and into its own
// types, without building generated messages. Such a type must put on the
// wire, and accept, exactly what the generated message does; its tests
// compare the two.
//
// # Memory
//
// gRPC's codec allocates three times for each message it encodes (the
// bytes, the buffer holding them and the list of buffers). Codec carves
// small encodings, and what holds them, out of shared chunks instead; a
// chunk is freed by the garbage collector once every message carved from
// it has been written. Encodings of more than [PoolThreshold] bytes come
// from gRPC's buffer pool, as with the default codec. An [Arena] does the
// same for what a decoder keeps of a message.
package protocodec
