// Package pipeline runs the vertices of a Numaflow Pipeline: all of them in one
// process, or one of them, as one replica among many processes.
//
// # Graph and buffers
//
// A [Graph] is a validated Pipeline's vertices and edges. Every vertex but a
// source reads an input buffer of its own, in one or more partitions named
// <pipeline>-<vertex>-<partition>, which the vertices with edges to it write
// along their conditions. [Buffers] holds them: [Memory] in one process, or
// [JetStream] on NATS JetStream (spec.isb.jetstream), where vertices in
// different processes meet.
//
// # Running
//
// [New] builds the vertices that run here, each a [vertex.Vertex]: every
// vertex, on in-memory buffers (the default) or on JetStream, or, with
// [WithVertex], one vertex on JetStream. [Pipeline.Run] runs them until its
// context ends; then the sources stop first, and on in-memory buffers the
// other vertices go on until the buffers are empty, for at most the drain
// timeout ([WithDrainTimeout]), so that nothing read is lost.
//
// # Ordered processing
//
// A map or sink vertex with ordered processing ([Vertex].Ordered, from
// spec.ordered or the vertex's ordered) keeps the order of each partition of
// its input buffer: the vertices writing to it pick its partitions by
// route.OrderedPartition (Numaflow's hash of the keys), each partition is
// read by one forwarder that forwards one message at a time
// (vertex.Spec.Ordered), and alone ([WithVertex]) replica i reads partition
// i. On JetStream its buffers' consumers keep one message in flight
// (jetstream.BufferSpec.Ordered).
package pipeline
